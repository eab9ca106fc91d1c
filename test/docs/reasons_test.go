/*
Copyright The DockerIOS Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package docs

import (
	"bufio"
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/callgraph/cha"
	"golang.org/x/tools/go/callgraph/vta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

// The troubleshooting page promises every condition reason DockerIOS
// writes. A list kept beside the page would drift from the code, so the
// reasons are read out of the code itself: the module's packages (tests
// excluded) are built into SSA, and every value stored into the Reason
// field of a metav1.Condition is followed back — through parameters to
// every call site, through results to every return, through locals, phis
// and the fields of other structs — to the string constants it can be.
// The Condition's Type is followed the same way, jointly with the reason
// where both arrive as parameters of one function (so `set(typ, status,
// reason, msg)` gives the pairs its callers pass, not every type crossed
// with every reason), and the kind is the ...Status struct whose
// Conditions the literal is set into, where that is visible.
//
// What cannot be followed to a constant — a reason built with
// fmt.Sprintf, read from a struct field nothing in the code sets, or
// returned by a call through an interface — fails the test with its
// position: a reason the page cannot list is a reason an operator cannot
// look up.

const (
	troubleshootingPage = "../../docs/operators/troubleshooting.md"
	metav1Pkg           = "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1Condition     = metav1Pkg + ".Condition"
)

// reasonUse is one reason as the code writes it. Kind or Type is "*" where
// the analysis cannot tell (e.g. a Condition kept in a field and set
// later); it then matches any kind or type on the page.
type reasonUse struct{ Kind, Type, Reason string }

func (u reasonUse) String() string { return u.Kind + " / " + u.Type + " / " + u.Reason }

type typeReason struct{ typ, reason string }

type reasonFlow struct {
	callers     map[*ssa.Function][]*ssa.CallCommon
	closures    map[*ssa.Function][]*ssa.MakeClosure
	fieldStores map[string][]*ssa.Store
	allocStores map[ssa.Value][]*ssa.Store
	fset        *token.FileSet
	problems    []string
	memo        map[ssa.Value][]string
	busy        map[ssa.Value]bool
	// cut counts the times trace met a value it was already following
	// (a loop through phis or fields): what was found below the cut is
	// not complete, so it is not remembered.
	cut int
}

func TestTroubleshootingCoversEveryConditionReason(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and type-checks the whole module")
	}
	code, problems := reasonsInCode(t)
	require.Empty(t, problems, "condition reasons the analysis cannot follow to a constant: make them constants (or teach test/docs/reasons_test.go the new flow)")
	require.NotEmpty(t, code)
	// REASONS_LIST=1 go test -v -run TestTroubleshooting ./test/docs/
	// prints what the code writes, kind / type / reason.
	if os.Getenv("REASONS_LIST") != "" {
		for _, u := range code {
			t.Log(u)
		}
	}
	page := reasonsOnPage(t)

	var missing, stale []string
	for _, u := range code {
		if !slices.ContainsFunc(page, func(p reasonUse) bool { return reasonMatches(u, p) }) {
			missing = append(missing, u.String())
		}
	}
	for _, p := range page {
		if !slices.ContainsFunc(code, func(u reasonUse) bool { return reasonMatches(u, p) }) {
			stale = append(stale, p.String())
		}
	}
	require.Empty(t, missing, "condition reasons the code writes that %s does not document (add a section under its kind and condition type)", troubleshootingPage)
	require.Empty(t, stale, "reasons %s documents that the code no longer writes under that kind and condition type (remove or move the section)", troubleshootingPage)
	t.Logf("%d distinct reasons, in %d sections of %s", len(distinctReasons(code)), len(page), troubleshootingPage)
}

func reasonMatches(code, page reasonUse) bool {
	return code.Reason == page.Reason &&
		(code.Type == "*" || code.Type == page.Type) &&
		(code.Kind == "*" || code.Kind == page.Kind)
}

func distinctReasons(us []reasonUse) []string {
	var rs []string
	for _, u := range us {
		if !slices.Contains(rs, u.Reason) {
			rs = append(rs, u.Reason)
		}
	}
	return rs
}

var (
	kindHeadingRE   = regexp.MustCompile("^## (MacOS[A-Za-z]+)\\s*$")
	typeHeadingRE   = regexp.MustCompile("^### `([A-Za-z]+)`")
	reasonHeadingRE = regexp.MustCompile("^#### `([A-Za-z]+)`")
)

// reasonsOnPage reads the page's sections: ## Kind, ### `Type`,
// #### `Reason`. Any other level-2 heading ends a kind.
func reasonsOnPage(t *testing.T) []reasonUse {
	t.Helper()
	f, err := os.Open(troubleshootingPage)
	require.NoError(t, err)
	defer f.Close()
	var out []reasonUse
	kind, typ := "", ""
	s := bufio.NewScanner(f)
	fenced := false
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		switch {
		case fenced:
		case kindHeadingRE.MatchString(line):
			kind, typ = kindHeadingRE.FindStringSubmatch(line)[1], ""
		case strings.HasPrefix(line, "## "):
			kind, typ = "", ""
		case typeHeadingRE.MatchString(line):
			typ = typeHeadingRE.FindStringSubmatch(line)[1]
		case reasonHeadingRE.MatchString(line):
			require.Truef(t, kind != "" && typ != "", "%s:%d: reason heading outside a ## Kind / ### `Type` section", troubleshootingPage, n)
			out = append(out, reasonUse{kind, typ, reasonHeadingRE.FindStringSubmatch(line)[1]})
		}
	}
	require.NoError(t, s.Err())
	return out
}

func reasonsInCode(t *testing.T) ([]reasonUse, []string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	// Everything that ships: the apiserver, the controller and the
	// binaries. The agent writes no Kubernetes object; test/ plays
	// KubeVirt and CDI, whose conditions are not DockerIOS's.
	cfg := &packages.Config{Mode: packages.LoadSyntax, Dir: root}
	pkgs, err := packages.Load(cfg, "./pkg/...", "./cmd/...")
	require.NoError(t, err)
	var loadErrs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			loadErrs = append(loadErrs, e.Error())
		}
	})
	require.Empty(t, loadErrs, "the module does not type-check")
	prog, _ := ssautil.Packages(pkgs, 0)
	prog.Build()

	a := &reasonFlow{
		callers:     map[*ssa.Function][]*ssa.CallCommon{},
		closures:    map[*ssa.Function][]*ssa.MakeClosure{},
		fieldStores: map[string][]*ssa.Store{},
		allocStores: map[ssa.Value][]*ssa.Store{},
		fset:        prog.Fset,
		memo:        map[ssa.Value][]string{},
		busy:        map[ssa.Value]bool{},
	}
	var sinks []*ssa.Store
	for fn := range ssautil.AllFunctions(prog) {
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				switch in := instr.(type) {
				case *ssa.MakeClosure:
					fn := in.Fn.(*ssa.Function)
					a.closures[fn] = append(a.closures[fn], in)
				case *ssa.Store:
					switch addr := in.Addr.(type) {
					case *ssa.FieldAddr:
						key := structFieldKey(addr.X.Type(), addr.Field)
						a.fieldStores[key] = append(a.fieldStores[key], in)
						if key == metav1Condition+".Reason" {
							sinks = append(sinks, in)
						}
					case *ssa.Alloc:
						a.allocStores[addr] = append(a.allocStores[addr], in)
					}
				}
			}
		}
	}

	// Callers come from a call graph, not from static calls alone: the
	// machine controller hands its `set` closure to helpers that call it
	// through a parameter.
	funcs := ssautil.AllFunctions(prog)
	for _, n := range vta.CallGraph(funcs, cha.CallGraph(prog)).Nodes {
		for _, e := range n.In {
			if e.Site != nil {
				a.callers[n.Func] = append(a.callers[n.Func], e.Site.Common())
			}
		}
	}

	seen := map[reasonUse]bool{}
	var out []reasonUse
	for _, s := range sinks {
		// `c := metav1.Condition{...}; c.Reason = x` builds the literal
		// in one variable and copies it whole into another: the copies
		// are one Condition.
		copies := a.copies(s.Addr.(*ssa.FieldAddr).X)
		var typeVal ssa.Value
		for _, st := range a.fieldStores[metav1Condition+".Type"] {
			if slices.Contains(copies, st.Addr.(*ssa.FieldAddr).X) {
				typeVal = st.Val
			}
		}
		kind := a.kindOf(copies)
		for _, p := range a.pairs(typeVal, s.Val, s.Pos()) {
			u := reasonUse{kind, p.typ, p.reason}
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, a.problems
}

func structFieldKey(ptr types.Type, field int) string {
	t := ptr.Underlying().(*types.Pointer).Elem()
	return types.TypeString(t, nil) + "." + t.Underlying().(*types.Struct).Field(field).Name()
}

// pairs is the (type, reason) pairs a Condition literal can be given.
// Where both come in as parameters of the same function, each call site
// is followed on its own, so a helper's types and reasons stay paired.
func (a *reasonFlow) pairs(typeVal, reasonVal ssa.Value, pos token.Pos) []typeReason {
	tp, ok1 := typeVal.(*ssa.Parameter)
	rp, ok2 := reasonVal.(*ssa.Parameter)
	if ok1 && ok2 && tp.Parent() == rp.Parent() {
		fn := tp.Parent()
		ti, ri := slices.Index(fn.Params, tp), slices.Index(fn.Params, rp)
		var out []typeReason
		if len(a.callers[fn]) == 0 {
			a.problem(fn.Pos(), "%s is never called, so the reasons it is passed cannot be found", fn)
		}
		for _, cc := range a.callers[fn] {
			out = append(out, a.pairs(callArg(cc, ti), callArg(cc, ri), cc.Pos())...)
		}
		return out
	}
	types := []string{"*"}
	if typeVal != nil {
		if ts := a.trace(typeVal); len(ts) > 0 {
			types = ts
		}
	}
	var out []typeReason
	for _, t := range types {
		for _, r := range a.trace(reasonVal) {
			out = append(out, typeReason{t, r})
		}
	}
	return out
}

// callArg is what a call passes for its callee's parameter i. An interface
// method call passes the receiver apart from the arguments.
func callArg(cc *ssa.CallCommon, i int) ssa.Value {
	if cc.IsInvoke() {
		if i == 0 {
			return cc.Value
		}
		return cc.Args[i-1]
	}
	return cc.Args[i]
}

// trace is the string constants v can be.
func (a *reasonFlow) trace(v ssa.Value) []string {
	if r, ok := a.memo[v]; ok {
		return r
	}
	if a.busy[v] {
		a.cut++
		return nil
	}
	a.busy[v] = true
	defer delete(a.busy, v)
	cut := a.cut
	var out []string
	add := func(vs ...ssa.Value) {
		for _, v := range vs {
			for _, s := range a.trace(v) {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	switch v := v.(type) {
	case *ssa.Const:
		if v.Value == nil || v.Value.Kind() != constant.String || constant.StringVal(v.Value) == "" {
			a.problem(v.Pos(), "an empty condition reason or type")
		} else {
			out = append(out, constant.StringVal(v.Value))
		}
	case *ssa.Parameter:
		fn := v.Parent()
		i := slices.Index(fn.Params, v)
		if len(a.callers[fn]) == 0 {
			a.problem(fn.Pos(), "%s is never called, so the reasons it is passed cannot be found", fn)
		}
		for _, cc := range a.callers[fn] {
			add(callArg(cc, i))
		}
	case *ssa.Phi:
		add(v.Edges...)
	case *ssa.ChangeType:
		add(v.X)
	case *ssa.Convert:
		add(v.X)
	case *ssa.Call:
		out = a.returns(v, 0)
	case *ssa.Extract:
		if call, ok := v.Tuple.(*ssa.Call); ok {
			out = a.returns(call, v.Index)
		} else {
			a.problem(v.Pos(), "a reason taken from %s", v.Tuple)
		}
	case *ssa.Field:
		out = a.field(types.NewPointer(v.X.Type()), v.Field, v.Pos())
	case *ssa.UnOp:
		if v.Op != token.MUL {
			a.problem(v.Pos(), "a reason computed by %s", v)
			break
		}
		switch x := v.X.(type) {
		case *ssa.FieldAddr:
			out = a.field(x.X.Type(), x.Field, v.Pos())
		case *ssa.Alloc:
			for _, s := range a.allocStores[x] {
				add(s.Val)
			}
		case *ssa.FreeVar:
			fn := x.Parent()
			i := slices.Index(fn.FreeVars, x)
			for _, mc := range a.closures[fn] {
				if alloc, ok := mc.Bindings[i].(*ssa.Alloc); ok {
					for _, s := range a.allocStores[alloc] {
						add(s.Val)
					}
				} else {
					a.problem(v.Pos(), "a reason captured from %s", mc.Bindings[i])
				}
			}
		default:
			a.problem(v.Pos(), "a reason loaded from %s", v.X)
		}
	default:
		a.problem(v.Pos(), "a reason computed by %s (%T): make it a constant", v, v)
	}
	if a.cut == cut {
		a.memo[v] = out
	}
	return out
}

// writtenHereOnly are JSON fields read into a reason whose JSON only
// this code writes, so the values it stores are all it can hold.
var writtenHereOnly = map[string]bool{
	// The pool's hold record in etcd: written by RaiseRestoreHolds, read
	// into the pool's OnHold condition.
	"github.com/dockerios/dockerios/pkg/storage/identityledger.Hold.Reason": true,
}

// field is what a struct field read into a reason can be: every value the
// code stores into that field. A Condition's own Reason or Type, copied
// from one Condition to another, is left out: the first Condition it was
// stored into is a sink of its own. A field with a JSON tag may be decoded
// from anything (the guest agent's stage, a Job's result): unless its type
// is a string type with declared constants (an enum, which the apiserver
// validates), it must not flow into a reason.
func (a *reasonFlow) field(ptr types.Type, index int, pos token.Pos) []string {
	key := structFieldKey(ptr, index)
	if key == metav1Condition+".Reason" || key == metav1Condition+".Type" {
		return nil
	}
	st := ptr.Underlying().(*types.Pointer).Elem().Underlying().(*types.Struct)
	if _, decoded := reflect.StructTag(st.Tag(index)).Lookup("json"); decoded && !writtenHereOnly[key] {
		if enum := stringEnumValues(st.Field(index).Type()); len(enum) > 0 {
			return enum
		}
		a.problem(pos, "a reason read from %s, which may be decoded from anything: map it to constants", key)
		return nil
	}
	stores := a.fieldStores[key]
	if len(stores) == 0 {
		a.problem(pos, "a reason read from %s, which nothing in the code sets: map it to constants", key)
	}
	var out []string
	for _, s := range stores {
		for _, r := range a.trace(s.Val) {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// stringEnumValues is the constants of a defined string type, declared in its
// package.
func stringEnumValues(t types.Type) []string {
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return nil
	}
	if b, ok := named.Underlying().(*types.Basic); !ok || b.Info()&types.IsString == 0 {
		return nil
	}
	var out []string
	scope := named.Obj().Pkg().Scope()
	for _, name := range scope.Names() {
		if c, ok := scope.Lookup(name).(*types.Const); ok && types.Identical(c.Type(), named) {
			out = append(out, constant.StringVal(c.Val()))
		}
	}
	return out
}

// returns is what result i of call can be.
func (a *reasonFlow) returns(call *ssa.Call, i int) []string {
	callee := call.Call.StaticCallee()
	if callee == nil || len(callee.Blocks) == 0 {
		a.problem(call.Pos(), "a reason returned by %s, which the analysis cannot see into: make it a constant", call.Call.Value)
		return nil
	}
	var out []string
	for _, b := range callee.Blocks {
		if ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return); ok {
			for _, r := range a.trace(ret.Results[i]) {
				if !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// copies is base and every variable it is copied into whole, or copied
// from whole.
func (a *reasonFlow) copies(base ssa.Value) []ssa.Value {
	out := []ssa.Value{base}
	for i := 0; i < len(out); i++ {
		v := out[i]
		for _, st := range a.allocStores[v] {
			if load, ok := st.Val.(*ssa.UnOp); ok && load.Op == token.MUL && !slices.Contains(out, load.X) {
				out = append(out, load.X)
			}
		}
		if v.Referrers() == nil {
			continue
		}
		for _, r := range *v.Referrers() {
			load, ok := r.(*ssa.UnOp)
			if !ok || load.Op != token.MUL || load.Referrers() == nil {
				continue
			}
			for _, rr := range *load.Referrers() {
				if st, ok := rr.(*ssa.Store); ok && st.Val == load && !slices.Contains(out, st.Addr) {
					out = append(out, st.Addr)
				}
			}
		}
	}
	return out
}

// kindOf is the kind whose status a Condition literal (at bases) is set
// into with meta.SetStatusCondition: the ...Status struct that holds the
// Conditions field. "*" where it is not visible from the literal.
func (a *reasonFlow) kindOf(bases []ssa.Value) string {
	kinds := map[string]bool{}
	var follow func(v ssa.Value, seen map[ssa.Value]bool)
	follow = func(v ssa.Value, seen map[ssa.Value]bool) {
		if seen[v] || v.Referrers() == nil {
			return
		}
		seen[v] = true
		for _, r := range *v.Referrers() {
			switch r := r.(type) {
			case *ssa.UnOp:
				if r.Op == token.MUL && r.X == v {
					follow(r, seen)
				}
			case *ssa.Phi:
				follow(r, seen)
			case *ssa.Call:
				callee := r.Call.StaticCallee()
				if callee == nil || callee.Name() != "SetStatusCondition" || len(r.Call.Args) != 2 || r.Call.Args[1] != v {
					continue
				}
				if fa, ok := r.Call.Args[0].(*ssa.FieldAddr); ok {
					name := types.TypeString(fa.X.Type().Underlying().(*types.Pointer).Elem(), func(*types.Package) string { return "" })
					kinds[strings.TrimSuffix(name, "Status")] = true
				}
			}
		}
	}
	for _, b := range bases {
		follow(b, map[ssa.Value]bool{})
	}
	if len(kinds) != 1 {
		return "*"
	}
	for k := range kinds {
		return k
	}
	return "*"
}

func (a *reasonFlow) problem(pos token.Pos, format string, args ...any) {
	a.problems = append(a.problems, fmt.Sprintf("%s: %s", a.fset.Position(pos), fmt.Sprintf(format, args...)))
}

#!/usr/bin/env bash
# Regenerates everything under pkg/ that a generator owns: deepcopy, conversion
# and defaulter functions, OpenAPI definitions, the versioned types' protobuf
# encoding (generated.proto, generated.pb.go and the protobuf tags in
# types.go), and the clientset, listers, informers and apply configurations in
# pkg/generated; and the field reference docs/reference/fields.md, made from
# those OpenAPI definitions.
#
# The generators come from k8s.io/code-generator and k8s.io/kube-openapi at the
# versions go.mod pins, so the output depends only on this repository.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

MODULE="$(go list -m)"
# `go list -m` does not download; on a fresh machine the module must be fetched first.
go mod download k8s.io/code-generator
CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"
# Generators install into bin/ rather than the user's GOPATH.
export GOBIN="${CODEGEN_BIN:-${ROOT}/bin/codegen}"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# The Scale subresource's type is served by us, so its schema must be among ours.
kube::codegen::gen_openapi \
    --output-dir "${ROOT}/pkg/generated/openapi" \
    --output-pkg "${MODULE}/pkg/generated/openapi" \
    --output-model-name-file "zz_generated.model_name.go" \
    --extra-pkgs "k8s.io/api/autoscaling/v1" \
    --report-filename "${ROOT}/hack/api-rules-violations.list" \
    --update-report \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --applyconfig-openapi-schema <(go run "${MODULE}/hack/models-schema") \
    --output-dir "${ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# The versioned types' protobuf encoding (generated.proto, generated.pb.go,
# and the protobuf tags go-to-protobuf writes into types.go): storage writes
# our objects in it when --storage-media-type asks (pkg/storage/codec says
# why JSON is still the default).
# go-to-protobuf reads and writes packages by import path under one root, and
# protoc finds the imported .proto files there too, so the root is a scratch
# tree of links: this repository, and apimachinery and gogo/protobuf (for
# gogo.proto and the descriptor.proto it imports) from the module cache at the
# versions go.mod pins. protoc is Debian's protobuf-compiler.
"${ROOT}/hack/ensure-protoc.sh"
PROTO_ROOT="$(mktemp -d -t dockerios-codegen-protobuf.XXXXXX)"
trap 'rm -rf "${PROTO_ROOT}"' EXIT
CODEGEN_VERSION="$(go list -m -f '{{.Version}}' k8s.io/code-generator)"
TOOLS_VERSION="$(go list -m -f '{{.Version}}' golang.org/x/tools)"
# Built outside this module, at the versions it pins: protoc-gen-gogo needs
# gogo/protobuf and goimports x/telemetry, which nothing we ship imports.
(cd "${PROTO_ROOT}" && go install "k8s.io/code-generator/cmd/go-to-protobuf@${CODEGEN_VERSION}" \
    "k8s.io/code-generator/cmd/go-to-protobuf/protoc-gen-gogo@${CODEGEN_VERSION}" &&
  go install "golang.org/x/tools/cmd/goimports@${TOOLS_VERSION}")
GOGO_DIR="$(cd "${PROTO_ROOT}" && go mod download -json github.com/gogo/protobuf@v1.3.2 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
go mod download k8s.io/apimachinery
mkdir -p "${PROTO_ROOT}/src/$(dirname "${MODULE}")" "${PROTO_ROOT}/src/k8s.io" "${PROTO_ROOT}/src/github.com/gogo"
ln -s "${ROOT}" "${PROTO_ROOT}/src/${MODULE}"
ln -s "$(go list -m -f '{{.Dir}}' k8s.io/apimachinery)" "${PROTO_ROOT}/src/k8s.io/apimachinery"
ln -s "${GOGO_DIR}" "${PROTO_ROOT}/src/github.com/gogo/protobuf"
# The packages listed with a leading '-' are only imported, never written.
PATH="${GOBIN}:${PATH}" "${GOBIN}/go-to-protobuf" \
    --go-header-file "${BOILERPLATE}" \
    --output-dir "${PROTO_ROOT}/src" \
    --proto-import "${PROTO_ROOT}/src" \
    --proto-import "${GOGO_DIR}/protobuf" \
    --apimachinery-packages "-k8s.io/apimachinery/pkg/util/intstr,-k8s.io/apimachinery/pkg/api/resource,-k8s.io/apimachinery/pkg/runtime/schema,-k8s.io/apimachinery/pkg/runtime,-k8s.io/apimachinery/pkg/apis/meta/v1" \
    --packages "${MODULE}/pkg/apis/dockerio/v1alpha1"
# gogo gives every message a Size method, so it renames a field called Size
# (SystemDiskSpec's) to Size_. The field keeps its name in our API; its
# type's sizer is ProtoSize instead (nothing outside the generated code
# calls it: the protobuf serializer sizes top-level kinds only). The field's
# protobuf tag in types.go is written by hand for the same reason: the
# generator does not recognise Size_ as Size.
V1ALPHA1="${ROOT}/pkg/apis/dockerio/v1alpha1"
awk '
  /^func / { sizeConflict = ($0 ~ /^func \((m|this) \*SystemDiskSpec\) /) }
  sizeConflict {
    sub(/^func \(m \*SystemDiskSpec\) Size\(\)/, "func (m *SystemDiskSpec) ProtoSize()")
    gsub(/m\.Size\(\)/, "m.ProtoSize()")
    gsub(/\.Size_/, ".Size")
    gsub(/field Size_/, "field Size")
    gsub(/`Size_:/, "`Size:")
  }
  { gsub(/m\.SystemDisk\.Size\(\)/, "m.SystemDisk.ProtoSize()"); print }
' "${V1ALPHA1}/generated.pb.go" > "${V1ALPHA1}/generated.pb.go.tmp"
mv "${V1ALPHA1}/generated.pb.go.tmp" "${V1ALPHA1}/generated.pb.go"

# The field reference is read from the OpenAPI definitions written above (the
# types' doc comments), so it follows the types like any generated code.
go run "${MODULE}/hack/api-reference" --output "${ROOT}/docs/reference/fields.md"

#!/usr/bin/env bash
# Builds the control-plane binaries the integration tests run -- bin/etcd,
# bin/kube-apiserver and bin/kube-controller-manager -- and, when named, the
# ones the node test (test/node) adds -- bin/kube-scheduler and bin/kubelet --
# from their Go modules,
# at the versions pinned in hack/tools/go.mod. Nothing here downloads a
# release binary: the machines this runs on reach only the Go module proxy, and
# Debian's etcd is too old for kube-apiserver 1.37, so everything is compiled.
# A cold build takes many minutes, so a binary is reused while the stamp next
# to it (bin/.NAME.stamp) records the same version and the same hash of
# hack/tools/go.mod, go.sum, the build flags and the Go toolchain.
#
#   hack/build-control-plane.sh                  build or reuse etcd, kube-apiserver, kube-controller-manager
#   hack/build-control-plane.sh etcd kubelet ... only the ones named (kube-scheduler, kubelet too)
#   FORCE=1 hack/build-control-plane.sh          rebuild even if the stamp matches
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
TOOLS_DIR="${ROOT}/hack/tools"
BIN_DIR="${BIN_DIR:-${ROOT}/bin}"
ALL=(etcd kube-apiserver kube-controller-manager)

usage() {
  echo "usage: $0 [$(IFS='|'; echo "${ALL[*]}|kube-scheduler|kubelet")]..." >&2
  exit 2
}

targets=()
for arg in "$@"; do
  case "${arg}" in
    etcd | kube-apiserver | kube-controller-manager | kube-scheduler | kubelet) targets+=("${arg}") ;;
    *) usage ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=("${ALL[@]}")
fi

"${ROOT}/hack/ensure-go.sh"
for tool in sha256sum awk; do
  command -v "${tool}" >/dev/null 2>&1 || { echo "${tool} is needed." >&2; exit 1; }
done

# hack/tools is its own module; never let a go.work or GOFLAGS=-mod=mod from
# the environment change how it resolves.
export GOWORK=off

# mod_field MODULE TEMPLATE: a field of a module as hack/tools/go.mod selects it.
mod_field() {
  (cd "${TOOLS_DIR}" && go list -mod=readonly -m -f "$2" "$1")
}

kube_version="$(mod_field k8s.io/kubernetes '{{.Version}}')"
kube_date="$(mod_field k8s.io/kubernetes '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}')"
etcd_version="$(mod_field go.etcd.io/etcd/server/v3 '{{.Version}}')"
if [[ ! "${kube_version}" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "hack/tools/go.mod selects k8s.io/kubernetes ${kube_version}; expected a v1.X.Y release." >&2
  exit 1
fi
kube_minor="${BASH_REMATCH[1]}"
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
# The staging modules must be the release of the same tag (the replace lines
# in hack/tools/go.mod); a mismatch builds a kube-apiserver nobody released.
for m in k8s.io/api k8s.io/apiserver k8s.io/component-base k8s.io/kube-aggregator; do
  got="$(mod_field "${m}" '{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}')"
  if [[ "${got}" != "${staging_version}" ]]; then
    echo "hack/tools/go.mod resolves ${m} to ${got}, not ${staging_version} to match k8s.io/kubernetes ${kube_version}." >&2
    exit 1
  fi
done

# The flags Kubernetes' own release build uses (hack/lib/golang.sh and
# hack/lib/version.sh): static, stripped, trimmed paths, these tags, and the
# version variables that --version and /version report. gitCommit is not set:
# the module proxy does not say which commit a tag is.
kube_ldflags=(-s -w)
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=(
    -X "${pkg}.gitVersion=${kube_version}"
    -X "${pkg}.gitMajor=1"
    -X "${pkg}.gitMinor=${kube_minor}"
    -X "${pkg}.gitTreeState=clean"
    -X "${pkg}.buildDate=${kube_date}"
  )
done
kube_flags=(-trimpath "-tags=selinux,notest,grpcnotrace" "-ldflags=${kube_ldflags[*]}")
# etcd's scripts/build_lib.sh: static, trimmed paths, no tags. Its version is
# a constant in go.etcd.io/etcd/api/v3/version; GitSHA stays unset (see above).
etcd_flags=(-trimpath "-ldflags=-s -w")

go_env="$(go env GOVERSION GOOS GOARCH | tr '\n' ' ')"

# build NAME PACKAGE VERSION FLAGS...
build() {
  local name="$1" pkg="$2" version="$3"
  shift 3
  local out="${BIN_DIR}/${name}" stamp="${BIN_DIR}/.${name}.stamp" want
  want="$(
    printf 'version=%s\nhash=%s\n' "${version}" "$(
      {
        cat "${TOOLS_DIR}/go.mod" "${TOOLS_DIR}/go.sum"
        printf '%s\n' "package=${pkg}" "go=${go_env}" "CGO_ENABLED=0" -mod=readonly -buildvcs=false "$@"
      } | sha256sum | awk '{print $1}'
    )"
  )"
  if [[ -z "${FORCE:-}" && -x "${out}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
    echo "reused  bin/${name} (${pkg}@${version}, $(du -h "${out}" | awk '{print $1}'))"
    return
  fi
  echo "build   bin/${name} from ${pkg}@${version} ..."
  mkdir -p "${BIN_DIR}"
  rm -f "${stamp}"
  local start=${SECONDS}
  # Build next to the target and rename, so an interrupted build never leaves
  # a partial binary behind. go build -v names each package as it compiles
  # it: counted, that is the progress shown every 30 s (kube-apiserver is
  # some 2,000 packages and many minutes on two cores).
  local log status=0
  log="$(mktemp)"
  (cd "${TOOLS_DIR}" && CGO_ENABLED=0 exec go build -v -mod=readonly -buildvcs=false "$@" -o "${out}.tmp" "${pkg}") 2>"${log}" &
  local pid=$! next=$((SECONDS + 30))
  while kill -0 "${pid}" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)); then
      local took=$((SECONDS - start))
      echo "        bin/${name}: $((took / 60))m$((took % 60))s, $(grep -cv '^#\|: ' "${log}" || true) packages compiled so far"
      next=$((SECONDS + 30))
    fi
  done
  wait "${pid}" || status=$?
  if ((status != 0)); then
    # What go build said besides the package names: the errors.
    grep -v '^[a-zA-Z0-9_./~-]*$' "${log}" >&2 || cat "${log}" >&2
    rm -f "${out}.tmp" "${log}"
    echo "FAILED  bin/${name} from ${pkg}@${version}" >&2
    exit 1
  fi
  rm -f "${log}"
  mv -f "${out}.tmp" "${out}"
  printf '%s\n' "${want}" >"${stamp}"
  local took=$((SECONDS - start))
  echo "built   bin/${name} in $((took / 60))m$((took % 60))s ($(du -h "${out}" | awk '{print $1}'))"
}

for name in "${targets[@]}"; do
  case "${name}" in
    etcd) build etcd go.etcd.io/etcd/server/v3 "${etcd_version}" "${etcd_flags[@]}" ;;
    kube-apiserver) build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${kube_version}" "${kube_flags[@]}" ;;
    kube-controller-manager) build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${kube_version}" "${kube_flags[@]}" ;;
    kube-scheduler) build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "${kube_version}" "${kube_flags[@]}" ;;
    kubelet) build kubelet k8s.io/kubernetes/cmd/kubelet "${kube_version}" "${kube_flags[@]}" ;;
  esac
done
echo "done in $((SECONDS / 60))m$((SECONDS % 60))s"

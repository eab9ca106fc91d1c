#!/usr/bin/env bash
# Builds bin/promtool from its Go module, github.com/prometheus/prometheus at
# the version hack/prometheus/go.mod pins, for the alerting rules' tests
# (artifacts/monitoring/tests, run by hack/prometheus). Nothing is downloaded
# but Go modules. The binary is reused while the stamp next to it
# (bin/.promtool.stamp) records the same hash of hack/prometheus/go.mod,
# go.sum, the build flags and the Go toolchain.
#
#   hack/build-promtool.sh          build or reuse bin/promtool
#   FORCE=1 hack/build-promtool.sh  rebuild even if the stamp matches
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
MOD_DIR="${ROOT}/hack/prometheus"
BIN_DIR="${BIN_DIR:-${ROOT}/bin}"
PKG=github.com/prometheus/prometheus/cmd/promtool

"${ROOT}/hack/ensure-go.sh"
# hack/prometheus is its own module; never let a go.work or GOFLAGS=-mod=mod
# from the environment change how it resolves.
export GOWORK=off

version="$(cd "${MOD_DIR}" && go list -mod=readonly -m -f '{{.Version}}' github.com/prometheus/prometheus)"
# Prometheus 3.X.Y is tagged v0.3XX.Y for Go; --version says the release,
# stamped as Prometheus's own build does (common's version package).
release="${version#v}"
if [[ "${version}" =~ ^v0\.3([0-9][0-9])\.([0-9]+)$ ]]; then
  release="3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"
fi
# remove_all_sd leaves out the service-discovery plugins (the cloud SDKs,
# most of the build): promtool's rule checks and rule tests do not use them.
flags=(-trimpath -tags=remove_all_sd "-ldflags=-s -w -X github.com/prometheus/common/version.Version=${release}")

out="${BIN_DIR}/promtool"
stamp="${BIN_DIR}/.promtool.stamp"
want="$(
  {
    cat "${MOD_DIR}/go.mod" "${MOD_DIR}/go.sum"
    printf '%s\n' "package=${PKG}" "go=$(go env GOVERSION GOOS GOARCH | tr '\n' ' ')" "CGO_ENABLED=0" -mod=readonly "${flags[@]}"
  } | sha256sum | awk '{print $1}'
)"
if [[ -z "${FORCE:-}" && -x "${out}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
  echo "reused  bin/promtool (${PKG}@${version})"
  exit 0
fi
echo "build   bin/promtool from ${PKG}@${version} ..."
mkdir -p "${BIN_DIR}"
rm -f "${stamp}"
start=${SECONDS}
# Build next to the target and rename, so an interrupted build never leaves
# a partial binary behind.
(cd "${MOD_DIR}" && CGO_ENABLED=0 go build -mod=readonly "${flags[@]}" -o "${out}.tmp" "${PKG}")
mv -f "${out}.tmp" "${out}"
printf '%s\n' "${want}" >"${stamp}"
took=$((SECONDS - start))
echo "built   bin/promtool in $((took / 60))m$((took % 60))s ($(du -h "${out}" | awk '{print $1}'))"

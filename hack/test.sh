#!/usr/bin/env bash
# Runs every test DockerIOS has, as CI does: formatting and vet, the
# generated-code check, unit and storage tests (against embedded etcd), and
# the integration tests that drive the real apiserver binary with the real
# kubectl. Needs Go and kubectl; nothing else.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
"${ROOT}/hack/ensure-go.sh"

export KUBECTL="${KUBECTL:-$(command -v kubectl || echo /usr/bin/kubectl)}"
if [[ ! -x "${KUBECTL}" ]]; then
  echo "kubectl is needed for the integration tests (set KUBECTL)." >&2
  exit 1
fi

echo "== gofmt"
unformatted="$(gofmt -l cmd pkg test hack)"
if [[ -n "${unformatted}" ]]; then
  echo "gofmt would change:" >&2
  echo "${unformatted}" >&2
  exit 1
fi

echo "== go vet"
go vet ./...

echo "== generated code"
hack/verify-codegen.sh

echo "== build"
go build -o bin/dockerios-apiserver ./cmd/apiserver
export DOCKERIOS_APISERVER_BIN="${ROOT}/bin/dockerios-apiserver"

echo "== tests"
# Registry and integration tests start etcd and apiserver processes; two
# packages at a time keeps a 2-core machine responsive.
go test -count=1 -p 2 -timeout 30m "$@" ./...

#!/usr/bin/env bash
# Regenerates test/harness/crds: KubeVirt's and CDI's CustomResourceDefinitions
# for the kinds DockerIOS makes or reads, from the upstream API modules at the
# versions go.mod pins (hack/upstream-crds says how), and in
# test/harness/crds/monitoring the Prometheus Operator's ServiceMonitor and
# PrometheusRule CRDs, at the version hack/upstream-crds pins. Run it after
# changing those versions, and commit the result.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
OUT="${1:-${ROOT}/test/harness/crds}"
BIN="${ROOT}/bin/upstream-crds"
mkdir -p "${BIN}"

cd "${ROOT}/hack/upstream-crds"
go build -o "${BIN}/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen
go build -o "${BIN}/upstream-crds" .
"${BIN}/upstream-crds" -root "${ROOT}" -controller-gen "${BIN}/controller-gen" -out "${OUT}"

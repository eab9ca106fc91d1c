#!/usr/bin/env bash
# Fails when the example's generated files (the deep-copy functions, the
# CRD) are not what hack/update-codegen.sh makes from api/. It generates
# into a scratch copy of the example, so the working tree is never touched.
set -o errexit
set -o nounset
set -o pipefail

EXAMPLE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
ROOT="$(cd "${EXAMPLE}/../.." && pwd -P)"
SCRATCH="$(mktemp -d -t gitlab-runner-verify-codegen.XXXXXX)"
trap 'rm -rf "${SCRATCH}"' EXIT

# The copy keeps resolving github.com/dockerios/dockerios to this checkout.
tar -C "${EXAMPLE}" -cf - . | tar -C "${SCRATCH}" -xf -
(cd "${SCRATCH}" && go mod edit -replace "github.com/dockerios/dockerios=${ROOT}")
BIN="${BIN:-${ROOT}/bin/gitlab-runner-example}" "${SCRATCH}/hack/update-codegen.sh"

status=0
for f in api/v1alpha1/zz_generated.deepcopy.go deploy/01-crd.yaml; do
  diff -Naup "${EXAMPLE}/${f}" "${SCRATCH}/${f}" || status=$?
done
if [[ ${status} -ne 0 ]]; then
  echo "The example's generated files are stale: run examples/gitlab-runner/hack/update-codegen.sh and commit the result." >&2
  exit 1
fi
echo "The example's generated files are up to date."

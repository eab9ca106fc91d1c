#!/usr/bin/env bash
# Fails when test/harness/crds is not what hack/update-upstream-crds.sh
# makes from the versions go.mod pins. It generates into a scratch
# directory, so the working tree is never touched.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
SCRATCH="$(mktemp -d -t dockerios-verify-upstream-crds.XXXXXX)"
trap 'rm -rf "${SCRATCH}"' EXIT

(cd "${ROOT}/hack/upstream-crds" && go vet ./...)
"${ROOT}/hack/update-upstream-crds.sh" "${SCRATCH}"
if ! diff -Naur "${ROOT}/test/harness/crds" "${SCRATCH}"; then
  echo "The upstream CRDs are stale: run hack/update-upstream-crds.sh and commit the result." >&2
  exit 1
fi
echo "The upstream CRDs are up to date."

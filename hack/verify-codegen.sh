#!/usr/bin/env bash
# Fails when the committed generated code (pkg/apis/**/zz_generated.*, the
# protobuf encoding and the protobuf tags it writes into v1alpha1/types.go,
# pkg/generated), the API rule report or the field reference
# (docs/reference/fields.md) is not what hack/update-codegen.sh produces from
# the current sources. It regenerates into a scratch copy of
# the repository, so the working tree is never touched.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
SCRATCH="$(mktemp -d -t dockerios-verify-codegen.XXXXXX)"
trap 'rm -rf "${SCRATCH}"' EXIT

# Everything but build output, local state and git internals.
tar -C "${ROOT}" --exclude=./bin --exclude=./.dockerios --exclude=./.git -cf - . | tar -C "${SCRATCH}" -xf -

mkdir -p "${ROOT}/bin/codegen"
CODEGEN_BIN="${ROOT}/bin/codegen" "${SCRATCH}/hack/update-codegen.sh" >/dev/null

# Compare only what the generators own, so unrelated edits in flight never
# count as staleness.
generated() {
  (cd "$1" && find pkg/generated -type f && find pkg/apis \( -name 'zz_generated.*' -o -name 'generated.proto' -o -name 'generated.pb.go' \) -type f &&
    echo pkg/apis/dockerio/v1alpha1/types.go && echo hack/api-rules-violations.list && echo docs/reference/fields.md) | LC_ALL=C sort
}
status=0
diff <(generated "${ROOT}") <(generated "${SCRATCH}") || status=$?
while read -r f; do
  if [[ -f "${SCRATCH}/${f}" ]]; then
    diff -Naup "${ROOT}/${f}" "${SCRATCH}/${f}" || status=$?
  fi
done < <(generated "${ROOT}")
if [[ ${status} -ne 0 ]]; then
  echo "Generated code is stale: run hack/update-codegen.sh and commit the result." >&2
  exit 1
fi
echo "Generated code is up to date."

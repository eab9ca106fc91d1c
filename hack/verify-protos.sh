#!/usr/bin/env bash
# Fails when the committed gRPC code of the sidecar hook
# (sidecar-hook/api/**/*.pb.go) is not what hack/update-protos.sh produces
# from the current .proto files. It regenerates into a scratch copy of the
# repository, so the working tree is never touched. The one line naming the
# protoc release is ignored: it differs between Debian releases, the code
# does not.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
SCRATCH="$(mktemp -d -t dockerios-verify-protos.XXXXXX)"
trap 'rm -rf "${SCRATCH}"' EXIT

# Everything but build output, local state and git internals.
tar -C "${ROOT}" --exclude=./bin --exclude=./.dockerios --exclude=./.git -cf - . | tar -C "${SCRATCH}" -xf -

mkdir -p "${ROOT}/bin/protoc-plugins"
PROTOC_PLUGIN_BIN="${ROOT}/bin/protoc-plugins" "${SCRATCH}/hack/update-protos.sh" >/dev/null

generated() {
  (cd "$1" && find sidecar-hook/api -name '*.pb.go' -type f) | LC_ALL=C sort
}
status=0
diff <(generated "${ROOT}") <(generated "${SCRATCH}") || status=$?
while read -r f; do
  if [[ -f "${SCRATCH}/${f}" ]]; then
    diff -Naup -I '^//.* protoc  *v[0-9.]*$' "${ROOT}/${f}" "${SCRATCH}/${f}" || status=$?
  fi
done < <(generated "${ROOT}")
if [[ ${status} -ne 0 ]]; then
  echo "Generated gRPC code is stale: run hack/update-protos.sh and commit the result." >&2
  exit 1
fi
echo "Generated gRPC code is up to date."

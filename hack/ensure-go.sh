#!/usr/bin/env bash
# Checks that Go, at least the version go.mod names, is on PATH, and says
# how to get it if not. It installs nothing: Go comes from the machine image
# or https://go.dev/dl.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
want="$(awk '/^go /{print $2; exit}' "${ROOT}/go.mod")"
if ! command -v go >/dev/null 2>&1; then
  if [[ -x /usr/local/go/bin/go ]]; then
    echo "go is not on PATH; add /usr/local/go/bin to PATH." >&2
  else
    echo "Go ${want} or newer is needed (https://go.dev/dl)." >&2
  fi
  exit 1
fi
have="$(go env GOVERSION | sed 's/^go//')"
if [[ "$(printf '%s\n%s\n' "${want}" "${have}" | sort -V | head -n1)" != "${want}" ]]; then
  echo "Go ${want} or newer is needed; this is Go ${have}." >&2
  exit 1
fi

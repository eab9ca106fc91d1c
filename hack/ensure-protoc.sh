#!/usr/bin/env bash
# Installs protoc from Debian's protobuf-compiler package when it is not on
# PATH. hack/update-protos.sh (the sidecar hook's gRPC code) and
# hack/update-codegen.sh (the API types' protobuf encoding) generate with it.
set -o errexit
set -o nounset
set -o pipefail

if ! command -v protoc >/dev/null 2>&1; then
  sudo=""
  [[ "$(id -u)" -ne 0 ]] && sudo="sudo"
  echo "protoc is missing; installing Debian's protobuf-compiler." >&2
  ${sudo} apt-get update -qq
  ${sudo} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler
fi

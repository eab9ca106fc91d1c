#!/usr/bin/env bash
# Regenerates the Go code of the sidecar hook's gRPC API
# (sidecar-hook/api/**/*.pb.go) from its .proto files.
#
# protoc comes from Debian's protobuf-compiler package (installed with apt
# when missing); protoc-gen-go and protoc-gen-go-grpc are built from their Go
# modules at the versions go.mod pins as tools, so the output depends only on
# this repository and the protoc release. protoc's version is written into the
# generated headers; hack/verify-protos.sh ignores that one line. The licence
# header reaches the generated files from the leading comment of each .proto.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

"${ROOT}/hack/ensure-protoc.sh"

# Plugins install into bin/ rather than the user's GOPATH.
PLUGIN_BIN="${PROTOC_PLUGIN_BIN:-${ROOT}/bin/protoc-plugins}"
mkdir -p "${PLUGIN_BIN}"
go build -o "${PLUGIN_BIN}/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "${PLUGIN_BIN}/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc

API_DIR="sidecar-hook/api"
find "${API_DIR}" -name '*.pb.go' -delete
while read -r proto; do
  # paths=source_relative puts each file next to its .proto.
  protoc \
    --plugin=protoc-gen-go="${PLUGIN_BIN}/protoc-gen-go" \
    --plugin=protoc-gen-go-grpc="${PLUGIN_BIN}/protoc-gen-go-grpc" \
    -I "${API_DIR}" \
    --go_out="${API_DIR}" --go_opt=paths=source_relative \
    --go-grpc_out="${API_DIR}" --go-grpc_opt=paths=source_relative \
    "${proto#"${API_DIR}/"}"
done < <(find "${API_DIR}" -name '*.proto' | LC_ALL=C sort)

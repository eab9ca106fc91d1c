#!/usr/bin/env bash
# Regenerates everything under pkg/ that a generator owns: deepcopy, conversion
# and defaulter functions, OpenAPI definitions, and the clientset, listers,
# informers and apply configurations in pkg/generated; and the field reference
# docs/reference/fields.md, made from those OpenAPI definitions.
#
# The generators come from k8s.io/code-generator and k8s.io/kube-openapi at the
# versions go.mod pins, so the output depends only on this repository.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

MODULE="$(go list -m)"
# `go list -m` does not download; on a fresh machine the module must be fetched first.
go mod download k8s.io/code-generator
CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"
# Generators install into bin/ rather than the user's GOPATH.
export GOBIN="${CODEGEN_BIN:-${ROOT}/bin/codegen}"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# The Scale subresource's type is served by us, so its schema must be among ours.
kube::codegen::gen_openapi \
    --output-dir "${ROOT}/pkg/generated/openapi" \
    --output-pkg "${MODULE}/pkg/generated/openapi" \
    --output-model-name-file "zz_generated.model_name.go" \
    --extra-pkgs "k8s.io/api/autoscaling/v1" \
    --report-filename "${ROOT}/hack/api-rules-violations.list" \
    --update-report \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --applyconfig-openapi-schema <(go run "${MODULE}/hack/models-schema") \
    --output-dir "${ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# The field reference is read from the OpenAPI definitions written above (the
# types' doc comments), so it follows the types like any generated code.
go run "${MODULE}/hack/api-reference" --output "${ROOT}/docs/reference/fields.md"

#!/usr/bin/env bash
# Generates what the example's API types imply: their deep-copy functions
# (api/v1alpha1/zz_generated.deepcopy.go) and the GitLabRunner
# CustomResourceDefinition (deploy/01-crd.yaml), with controller-gen as
# pinned in hack/tools. Run it after changing api/, and commit the result;
# hack/verify-codegen.sh fails while it is stale.
#
#   BIN=...  where controller-gen is built (default: the checkout's bin/)
set -o errexit
set -o nounset
set -o pipefail

EXAMPLE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="${BIN:-$(cd "${EXAMPLE}/../.." && pwd -P)/bin/gitlab-runner-example}"
mkdir -p "${BIN}"
(cd "${EXAMPLE}/hack/tools" && go build -o "${BIN}/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)

cd "${EXAMPLE}"
"${BIN}/controller-gen" object:headerFile=hack/boilerplate.go.txt paths=./api/...
SCRATCH="$(mktemp -d -t gitlab-runner-crd.XXXXXX)"
trap 'rm -rf "${SCRATCH}"' EXIT
"${BIN}/controller-gen" crd paths=./api/... output:crd:dir="${SCRATCH}"
{
  echo "# The GitLabRunner CustomResourceDefinition: generated from api/v1alpha1 by"
  echo "# hack/update-codegen.sh (controller-gen); do not edit."
  cat "${SCRATCH}/gitlab.examples.dockerios.io_gitlabrunners.yaml"
} >deploy/01-crd.yaml

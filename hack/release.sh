#!/usr/bin/env bash
# Builds a DockerIOS release: every image (hack/images.sh) and one manifest
# that installs it, each image pinned by digest.
#
#   hack/release.sh [VERSION]
#
#   _output/images/...               the images (OCI layouts and tars)
#   _output/release/dockerios.yaml   artifacts/deploy, images by digest,
#                                    labelled with the version
#   _output/release/dockerios-ledger.yaml
#                                    artifacts/ledger: the namespace and
#                                    the ledger's volumes, which an
#                                    uninstall of dockerios.yaml leaves
#   _output/release/dockerios.yaml.sha256, dockerios-ledger.yaml.sha256
#
# VERSION defaults to hack/version.sh's (git describe); a release names it,
# e.g. v0.2.0. REGISTRY (ghcr.io/dockerios) is where the images are to be
# pushed: the manifest names REGISTRY/NAME@sha256:DIGEST, so whoever
# pushes them there (crane, skopeo or oras copy the OCI layouts as they
# are) gets exactly these bytes.
#
# Install: kubectl apply --server-side -f dockerios-ledger.yaml -f dockerios.yaml, then
# kubectl wait apiservice/v1alpha1.dockerios.io --for condition=Available.
# Every image, the bootdisk and hook images the controller hands to Jobs
# and VMs included (PodTemplate dockerios-images), can be retargeted with
# kustomize's images: (docs/operators/install.md).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

if [[ $# -gt 1 ]]; then
  echo "usage: $0 [VERSION]" >&2
  exit 2
fi
if [[ $# -eq 1 ]]; then
  export VERSION="$1"
fi
REGISTRY="${REGISTRY:-ghcr.io/dockerios}"
export REGISTRY
IMAGES_DIR="${OUTPUT:-${ROOT}/_output/images}"
RELEASE_DIR="${RELEASE_DIR:-${ROOT}/_output/release}"

# Only the images the release installs or hands out, and etcd's for
# artifacts/ha (its digest is in images.txt: an overlay pins it with
# kustomize images:); the workload example (gitlab-runner-controller) is
# built by hack/images.sh but released with the example.
# The version is read once: images and manifest say the same.
version="$(DOCKERIOS_GIT_VERSION="${VERSION:-}" hack/version.sh --git-version)"
IMAGES="dockerios-apiserver dockerios-controller dockerios-sidecar-hook dockerios-bootdisk dockerios-etcd" \
  OUTPUT="${IMAGES_DIR}" VERSION="${version}" hack/images.sh

work="${RELEASE_DIR}/kustomize"
rm -rf "${work}"
mkdir -p "${work}"
{
  echo "# Made by hack/release.sh: artifacts/deploy with every image pinned by digest."
  echo "resources:"
  echo "- $(realpath --relative-to="${work}" "${ROOT}/artifacts/deploy")"
  echo "labels:"
  echo "- pairs:"
  echo "    app.kubernetes.io/version: ${version}"
  echo "  includeTemplates: true"
  echo "images:"
  for name in dockerios-apiserver dockerios-controller dockerios-sidecar-hook dockerios-bootdisk; do
    ref="$(awk -v n="${name}" '$1 == n {print $2}' "${IMAGES_DIR}/images.txt")"
    if [[ "${ref}" != *"@sha256:"* ]]; then
      echo "release: ${IMAGES_DIR}/images.txt has no digest for ${name}" >&2
      exit 1
    fi
    echo "- name: ghcr.io/dockerios/${name}"
    echo "  newName: ${REGISTRY}/${name}"
    echo "  digest: ${ref##*@}"
  done
} >"${work}/kustomization.yaml"

out="${RELEASE_DIR}/dockerios.yaml"
{
  echo "# DockerIOS ${version} ($(git rev-parse HEAD))."
  echo "#   kubectl apply --server-side -f dockerios-ledger.yaml -f dockerios.yaml"
  echo "#   kubectl wait apiservice/v1alpha1.dockerios.io --for condition=Available"
  echo "# Made by hack/release.sh; every image is pinned by digest."
  kubectl kustomize "${work}"
} >"${out}.tmp"
# Nothing may still name an image by tag: a digest is what was built.
if grep -nE 'image: .*' "${out}.tmp" | grep -v '@sha256:[0-9a-f]\{64\}$' >&2; then
  echo "release: the lines above name an image without a digest" >&2
  exit 1
fi
mv -f "${out}.tmp" "${out}"
ledger="${RELEASE_DIR}/dockerios-ledger.yaml"
{
  echo "# DockerIOS ${version} ($(git rev-parse HEAD)): the identity ledger's namespace and volumes."
  echo "#   kubectl apply --server-side -f dockerios-ledger.yaml    # before dockerios.yaml"
  echo "# Uninstalling DockerIOS (kubectl delete -f dockerios.yaml) leaves them, and the"
  echo "# ledger with them; deleting this file's objects deletes the ledger (docs/operators/uninstall.md)."
  kubectl kustomize "${ROOT}/artifacts/ledger"
} >"${ledger}.tmp"
mv -f "${ledger}.tmp" "${ledger}"
(cd "${RELEASE_DIR}" && sha256sum dockerios.yaml >dockerios.yaml.sha256 && sha256sum dockerios-ledger.yaml >dockerios-ledger.yaml.sha256)
echo "release: ${version}: ${out}"

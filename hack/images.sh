#!/usr/bin/env bash
# Builds every image DockerIOS's manifests and controller name, without a
# container engine and without pulling from any registry, into OCI layouts:
#
#   _output/images/NAME/        the OCI image layout (one image)
#   _output/images/NAME.tar     the same layout as a tar (ctr images import)
#   _output/images/images.txt   NAME REF@DIGEST, one line an image
#
#   dockerios-apiserver, dockerios-controller, dockerios-sidecar-hook,
#   gitlab-runner-controller    static Go binaries (CGO_ENABLED=0) on a
#                               base of a CA bundle, passwd/group with the
#                               non-root user 65532 and /tmp (hack/imagebuild)
#   dockerios-bootdisk          GPL-3.0: a Debian userland of exactly the
#                               packages the builder runs (mmdebstrap), the
#                               builder, its pinned inputs and their licences
#   dockerios-etcd              etcd's server (Apache-2.0), built from the
#                               module hack/tools/go.mod pins as
#                               hack/build-control-plane.sh builds bin/etcd,
#                               on the same base: artifacts/ha's members
#
# KubeVirt's virt-launcher with isa-applesmc (artifacts/kubevirt/Dockerfile)
# is not built here: it is a rebuild of KubeVirt's CentOS-based image, a
# cluster prerequisite rather than a DockerIOS component.
#
# The same commit gives the same digests: binaries are built with -trimpath
# and no build ID, every file's time is the commit's, and the Debian
# userland is built with SOURCE_DATE_EPOCH set to it.
#
# Environment:
#   REGISTRY                   image repository prefix (ghcr.io/dockerios)
#   VERSION                    image tag and stamped version (default: hack/version.sh's, from git)
#   OUTPUT                     output directory (_output/images)
#   DOCKERIOS_BOOTDISK_INPUTS  the bootdisk's upstream inputs, as
#                              bootdisk/image/fetch-inputs.sh lays them out;
#                              unset: the committed test subset
#                              (bootdisk/image/testdata-inputs.sh), and the
#                              image is labelled io.dockerios.bootdisk.inputs=testdata
#   IMAGES                     a space-separated subset of the names above
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
"${ROOT}/hack/ensure-go.sh"
export GOWORK=off GOFLAGS=-mod=readonly

REGISTRY="${REGISTRY:-ghcr.io/dockerios}"
OUTPUT="${OUTPUT:-${ROOT}/_output/images}"
ALL=(dockerios-apiserver dockerios-controller dockerios-sidecar-hook gitlab-runner-controller dockerios-bootdisk dockerios-etcd)
read -r -a want <<<"${IMAGES:-${ALL[*]}}"

# VERSION, when set, is the version stamped and tagged (hack/version.sh
# checks it is a semver).
export DOCKERIOS_GIT_VERSION="${VERSION:-${DOCKERIOS_GIT_VERSION:-}}"
declare -A v
while IFS='=' read -r key value; do v[${key}]="${value}"; done < <(hack/version.sh --env)
VERSION="${v[GIT_VERSION]}"
COMMIT="${v[GIT_COMMIT]}"
CREATED="${v[BUILD_DATE]}"
LDFLAGS="$(hack/version.sh --ldflags)"
SOURCE_DATE_EPOCH="$(git show -s --format=%ct HEAD)"
SOURCE="https://github.com/dockerios/dockerios"

work="${ROOT}/_output/build"
mkdir -p "${OUTPUT}" "${work}/bin"

echo "images: version ${VERSION}, revision ${COMMIT}, created ${CREATED}"
imagebuild="${work}/bin/imagebuild"
(cd hack/imagebuild && go build -trimpath -o "${imagebuild}" .)

# gobuild DIR PACKAGE OUT: a static linux/amd64 binary with the version
# stamped in, reproducibly.
gobuild() {
  (cd "$1" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= ${LDFLAGS}" -o "$3" "$2")
}

labels() {
  printf -- '--label=%s\n' \
    "org.opencontainers.image.title=$1" \
    "org.opencontainers.image.source=${SOURCE}" \
    "org.opencontainers.image.revision=${COMMIT}" \
    "org.opencontainers.image.version=${VERSION}" \
    "org.opencontainers.image.created=${CREATED}" \
    "org.opencontainers.image.licenses=$2"
}

# image NAME IMAGEBUILD-FLAGS...: builds NAME and records its digest.
image() {
  local name="$1"
  shift
  local ref
  ref="$("${imagebuild}" --ref "${REGISTRY}/${name}:${VERSION}" --created "${CREATED}" \
    --layout "${OUTPUT}/${name}" --archive "${OUTPUT}/${name}.tar" "$@")"
  printf '%s %s\n' "${name}" "${ref}" >>"${OUTPUT}/images.txt.tmp"
  echo "built   ${ref} ($(du -h "${OUTPUT}/${name}.tar" | awk '{print $1}'))"
}

# go_image NAME MODULE-DIR PACKAGE LICENCE: a static Go binary as
# /usr/local/bin/NAME, its entrypoint, run as 65532.
go_image() {
  local name="$1" dir="$2" pkg="$3" licence="$4"
  gobuild "${dir}" "${pkg}" "${work}/bin/${name}"
  mapfile -t l < <(labels "${name}" "${licence}")
  image "${name}" --base static --file "/usr/local/bin/${name}=${work}/bin/${name}" \
    --file "/usr/share/doc/${name}/LICENSE=${ROOT}/LICENSE" \
    --entrypoint "/usr/local/bin/${name}" "${l[@]}"
}

# etcd_image: etcd's server from its own module, at the version
# hack/tools/go.mod pins (the one the tests run), static and stripped as
# etcd's release build is, with etcd's licence.
etcd_image() {
  local name=dockerios-etcd version dir
  version="$(cd hack/tools && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
  dir="$(cd hack/tools && go list -m -f '{{.Dir}}' go.etcd.io/etcd/server/v3)"
  (cd hack/tools && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid=" -o "${work}/bin/${name}" go.etcd.io/etcd/server/v3)
  mapfile -t l < <(labels "${name}" Apache-2.0)
  image "${name}" --base static --file "/usr/local/bin/etcd=${work}/bin/${name}" \
    --file "/usr/share/doc/${name}/LICENSE=${dir}/LICENSE" \
    --entrypoint /usr/local/bin/etcd "${l[@]}" "--label=io.dockerios.etcd.version=${version}"
}

bootdisk_image() {
  # shellcheck source=../bootdisk/image/pins.sh
  source "${ROOT}/bootdisk/image/pins.sh"
  local inputs="${DOCKERIOS_BOOTDISK_INPUTS:-}"
  if [[ -z "${inputs}" ]]; then
    inputs="${work}/bootdisk-inputs"
    bootdisk/image/testdata-inputs.sh "${inputs}"
  fi
  local origin
  origin="$(cat "${inputs}/origin")"

  # The userland: the packages' files and their dependencies' (mmdebstrap's
  # extract variant runs no maintainer scripts and installs no dpkg, shell
  # or apt), from the machine's own Debian sources, at the commit's time.
  # --mode=auto: root mode as root, an unprivileged user namespace
  # otherwise.
  # Reused while the suite, packages and sources are unchanged (NO_CACHE=1
  # makes it again). mmdebstrap picks its output format from the file's
  # extension: the temporary file must end in .tar too.
  command -v mmdebstrap >/dev/null 2>&1 || "${ROOT}/hack/install-debian-packages.sh"
  local sources=/etc/apt/sources.list.d/debian.sources
  [[ -f "${sources}" ]] || sources=/etc/apt/sources.list
  local key rootfs
  key="$(printf '%s\n' "${DEBIAN_SUITE}" "${DEBIAN_PACKAGES}" "${SOURCE_DATE_EPOCH}" | cat - "${sources}" | sha256sum | cut -c1-16)"
  rootfs="${work}/bootdisk-rootfs-${key}.tar"
  if [[ -n "${NO_CACHE:-}" || ! -f "${rootfs}" ]]; then
    echo "rootfs  ${DEBIAN_SUITE}: ${DEBIAN_PACKAGES} (mmdebstrap) ..."
    rm -f "${work}"/bootdisk-rootfs-*.tar # another commit's
    SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH}" mmdebstrap --quiet --variant=extract \
      --include="${DEBIAN_PACKAGES}" --mode=auto "${DEBIAN_SUITE}" "${rootfs%.tar}.tmp.tar" "${sources}"
    mv -f "${rootfs%.tar}.tmp.tar" "${rootfs}"
  fi

  # The builder, and the default template derived from the inputs' config
  # (bootdisk template fails if a key it fills moved upstream).
  gobuild bootdisk ./cmd/bootdisk "${work}/bin/bootdisk"
  local stage="${work}/bootdisk-stage"
  rm -rf "${stage}" && mkdir -p "${stage}/template" "${stage}/doc"
  "${work}/bin/bootdisk" template --from "${inputs}/config.plist" --output "${stage}/template/config.plist"
  local files=(
    "--file=/opt/dockerios-bootdisk/bin/bootdisk=${work}/bin/bootdisk"
    "--file=/opt/dockerios-bootdisk/template/config.plist=${stage}/template/config.plist"
    "--tree=/opt/dockerios-bootdisk/efi=${inputs}/efi"
    "--tree=/usr/share/doc/dockerios-bootdisk=${inputs}/doc"
    "--file=/usr/share/doc/dockerios-bootdisk/LICENSE=${ROOT}/bootdisk/LICENSE"
    "--file=/usr/share/doc/dockerios-bootdisk/NOTICE=${ROOT}/bootdisk/NOTICE"
    "--file=/usr/share/doc/dockerios-bootdisk/README.md=${ROOT}/bootdisk/README.md"
  )
  # fetch-macOS-v2.py, which `bootdisk recovery` runs with the image's
  # python3 (both input layouts have it).
  files+=("--file=/opt/dockerios-bootdisk/recovery/fetch-macOS-v2.py=${inputs}/recovery/fetch-macOS-v2.py")
  [[ -f "${inputs}/macserial" ]] && files+=("--file=/opt/dockerios-bootdisk/bin/macserial=${inputs}/macserial")
  [[ -f "${inputs}/osx-serial-generator-nopicker.plist" ]] &&
    files+=("--file=/opt/dockerios-bootdisk/template/osx-serial-generator-nopicker.plist=${inputs}/osx-serial-generator-nopicker.plist")
  local envs=()
  while IFS= read -r line; do
    [[ -n "${line}" ]] && envs+=("--env=${line}")
  done <"${inputs}/env"
  mapfile -t l < <(labels dockerios-bootdisk GPL-3.0-or-later)
  image dockerios-bootdisk --base "${rootfs}" "${files[@]}" "${envs[@]}" "${l[@]}" \
    "--label=io.dockerios.bootdisk.inputs=${origin}" \
    --entrypoint /opt/dockerios-bootdisk/bin/bootdisk
}

start=${SECONDS}
rm -f "${OUTPUT}/images.txt.tmp"
for name in "${want[@]}"; do
  case "${name}" in
    dockerios-apiserver) go_image "${name}" . ./cmd/apiserver Apache-2.0 ;;
    dockerios-controller) go_image "${name}" . ./cmd/controller Apache-2.0 ;;
    dockerios-sidecar-hook) go_image "${name}" . ./sidecar-hook/cmd/dockerios-sidecar-hook Apache-2.0 ;;
    gitlab-runner-controller) go_image "${name}" examples/gitlab-runner ./cmd/gitlab-runner-controller Apache-2.0 ;;
    dockerios-bootdisk) bootdisk_image ;;
    dockerios-etcd) etcd_image ;;
    *)
      echo "images: unknown image ${name}; known: ${ALL[*]}" >&2
      exit 2
      ;;
  esac
done
# images.txt lists what this run built, merged over earlier runs' lines for
# images not rebuilt.
if [[ -f "${OUTPUT}/images.txt" ]]; then
  awk 'NR==FNR {built[$1]=1; next} !($1 in built)' "${OUTPUT}/images.txt.tmp" "${OUTPUT}/images.txt" >>"${OUTPUT}/images.txt.tmp"
fi
sort -o "${OUTPUT}/images.txt" "${OUTPUT}/images.txt.tmp"
rm -f "${OUTPUT}/images.txt.tmp"
echo "images: done in $((SECONDS - start))s; ${OUTPUT}/images.txt"

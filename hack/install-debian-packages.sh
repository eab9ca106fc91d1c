#!/usr/bin/env bash
# Installs, from Debian, every package the scripts and tests need that is not
# already there, and prints what it installs. Run by .ci/run and hack/test.sh;
# safe to run again (it installs nothing when everything is present). Uses
# sudo only when not root.
#
#   tar, diffutils, gawk, coreutils, procps, util-linux   the scripts
#   curl                                                  docs/users/workloads.md's look at the fake GitLab
#   protobuf-compiler                                     hack/verify-protos.sh, hack/verify-codegen.sh
#   fdisk, mtools, qemu-utils                             the bootdisk builder's tests
#   python3                                               the bootdisk recovery tests (they run
#                                                         fetch-macOS-v2.py)
#   containerd, runc, containernetworking-plugins,        the node test (test/node): a real
#   iproute2                                              kubelet's runtime and pod network
#   mmdebstrap                                            hack/images.sh (the bootdisk's userland)
#   libvirt-daemon (+ driver-qemu), libvirt-clients,      the hook through real libvirt
#   qemu-system-x86, ovmf                                 and QEMU (sidecar-hook/e2e)
set -o errexit
set -o nounset
set -o pipefail

# sfdisk and libvirtd live in /usr/sbin, which a non-root PATH lacks.
export PATH="${PATH}:/usr/sbin:/sbin"

# Each entry is <file that proves the package is installed>:<package>. A
# command name is looked up on PATH; an absolute path must exist.
tools=(
  tar:tar diff:diffutils awk:gawk sort:coreutils seq:coreutils nohup:coreutils
  pgrep:procps setsid:util-linux curl:curl
  protoc:protobuf-compiler
  sfdisk:fdisk mformat:mtools mcopy:mtools qemu-img:qemu-utils python3:python3
  containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins ip:iproute2
  mmdebstrap:mmdebstrap unshare:util-linux
)
# Installed without their recommends, which would bring the system daemon's
# services, networks and other hypervisors' drivers: the tests run their own
# unprivileged libvirtd.
virt=(
  libvirtd:libvirt-daemon virt-qemu-run:libvirt-daemon-driver-qemu virsh:libvirt-clients
  qemu-system-x86_64:qemu-system-x86
  /usr/share/OVMF/OVMF_CODE_4M.secboot.fd:ovmf
)

missing_from() {
  local entry file pkg
  for entry in "$@"; do
    file="${entry%%:*}" pkg="${entry##*:}"
    if [[ "${file}" == /* ]]; then
      [[ -e "${file}" ]] && continue
    else
      command -v "${file}" >/dev/null 2>&1 && continue
    fi
    echo "${pkg}"
  done | sort -u
}
mapfile -t missing_tools < <(missing_from "${tools[@]}")
mapfile -t missing_virt < <(missing_from "${virt[@]}")
if [[ ${#missing_tools[@]} -eq 0 && ${#missing_virt[@]} -eq 0 ]]; then
  exit 0
fi

sudo=""
[[ "$(id -u)" -ne 0 ]] && sudo="sudo"
echo "install-debian-packages: installing ${missing_tools[*]} ${missing_virt[*]}"
${sudo} apt-get update -qq
if [[ ${#missing_tools[@]} -gt 0 ]]; then
  ${sudo} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_tools[@]}"
fi
if [[ ${#missing_virt[@]} -gt 0 ]]; then
  ${sudo} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_virt[@]}"
fi

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Assembles the bootdisk image's inputs from what this repository commits as
# test data, for machines that cannot reach the upstream repositories (CI,
# and the node test that runs the image for real):
#
#   bootdisk/image/testdata-inputs.sh OUTDIR
#
# The EFI files are OSX-KVM's at OSX_KVM_COMMIT, each checked against the
# sha256 that testdata/opencore-1.0.5/README.md records for it — the subset
# OpenCore needs before it loads a kernel (no kexts, no ACPI tables). The
# template source is DockerIOS's own opencore-boot-config.plist (OSX-KVM's
# values for what OpenCore acts on before a kernel), not OSX-KVM's
# config.plist. fetch-macOS-v2.py is OSX-KVM's at OSX_KVM_COMMIT, committed
# unchanged as recovery/fetch-macOS-v2.py and checked against
# FETCH_MACOS_SHA256. macserial and osx-serial-generator's template are
# absent: `bootdisk render` uses neither. An image built from these inputs says so
# in its label io.dockerios.bootdisk.inputs=testdata; a release for real
# clusters is built from fetch-inputs.sh's.
set -o errexit -o nounset -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=pins.sh
source "${here}/pins.sh"
testdata="${here}/../testdata"
out="${1:?usage: $0 OUTDIR}"

rm -rf "${out}"
mkdir -p "${out}/efi" "${out}/doc"
cp -a "${testdata}/opencore-1.0.5/efi/EFI" "${out}/efi/EFI"

# Every file the README's table names, with its sha256, and no other.
want="$(sed -n 's/^| `\(EFI\/[^`]*\)` | [0-9]* | `\([0-9a-f]\{64\}\)` |.*$/\2  \1/p' "${testdata}/opencore-1.0.5/README.md" | LC_ALL=C sort -k2)"
if [[ -z "${want}" ]]; then
  echo "testdata-inputs: no EFI checksums found in testdata/opencore-1.0.5/README.md" >&2
  exit 1
fi
(cd "${out}/efi" && sha256sum --check --strict --quiet <<<"${want}") || {
  echo "testdata-inputs: an EFI file differs from the pinned sha256" >&2
  exit 1
}
have="$(cd "${out}/efi" && find EFI -type f | LC_ALL=C sort)"
if [[ "${have}" != "$(awk '{print $2}' <<<"${want}")" ]]; then
  echo "testdata-inputs: the EFI files are not exactly those the README pins:" >&2
  diff <(echo "${have}") <(awk '{print $2}' <<<"${want}") >&2 || true
  exit 1
fi

cp "${testdata}/opencore-boot-config.plist" "${out}/config.plist"
mkdir -p "${out}/recovery"
cp "${here}/../recovery/fetch-macOS-v2.py" "${out}/recovery/fetch-macOS-v2.py"
printf '%s  %s\n' "${FETCH_MACOS_SHA256}" "${out}/recovery/fetch-macOS-v2.py" | sha256sum --check --strict --quiet || {
  echo "testdata-inputs: recovery/fetch-macOS-v2.py differs from the pinned sha256" >&2
  exit 1
}
cp "${testdata}/opencore-1.0.5/LICENSE.txt" "${out}/doc/OpenCorePkg-LICENSE.txt"
cp "${testdata}/opencore-1.0.5/APSL-2.0.txt" "${out}/doc/OpenCorePkg-APSL-2.0.txt"
cp "${testdata}/opencore-1.0.5/THIRD-PARTY-NOTICES.txt" "${out}/doc/OpenCorePkg-THIRD-PARTY-NOTICES.txt"
cp "${testdata}/opencore-1.0.5/README.md" "${out}/doc/OpenCore-test-data-README.md"
echo testdata >"${out}/origin"
cat >"${out}/env" <<ENV
DOCKERIOS_BOOTDISK_TEMPLATE_COMMIT=${OSX_KVM_COMMIT}
DOCKERIOS_BOOTDISK_EFI_COMMIT=${OSX_KVM_COMMIT}
ENV

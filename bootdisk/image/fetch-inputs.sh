#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Fetches the bootdisk image's upstream inputs at the commits pins.sh names,
# checks each against its pinned sha256, builds macserial from its sources,
# and lays them out for hack/images.sh (DOCKERIOS_BOOTDISK_INPUTS=OUTDIR):
#
#   bootdisk/image/fetch-inputs.sh OUTDIR
#
# Needs git, curl and gcc, and a network that reaches GitHub (the machines
# DockerIOS is developed on do not: there, testdata-inputs.sh assembles the
# committed subset instead). Nothing is fetched when the image runs.
set -o errexit -o nounset -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=pins.sh
source "${here}/pins.sh"
out="${1:?usage: $0 OUTDIR}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

rm -rf "${out}"
mkdir -p "${out}/efi" "${out}/doc"

raw() { curl -fsSL --retry 3 -o "$3" "https://raw.githubusercontent.com/$1/$2"; }
check() { printf '%s  %s\n' "$1" "$2" | sha256sum --check --strict --quiet; }

# osx-serial-generator's template and licence.
raw "sickcodes/osx-serial-generator/${OSX_SERIAL_GENERATOR_COMMIT}" "${OSX_SERIAL_GENERATOR_TEMPLATE_FILE}" "${out}/osx-serial-generator-nopicker.plist"
raw "sickcodes/osx-serial-generator/${OSX_SERIAL_GENERATOR_COMMIT}" LICENSE "${out}/doc/osx-serial-generator-LICENSE"
check "${OSX_SERIAL_GENERATOR_TEMPLATE_SHA256}" "${out}/osx-serial-generator-nopicker.plist"
check "${OSX_SERIAL_GENERATOR_LICENSE_SHA256}" "${out}/doc/osx-serial-generator-LICENSE"

# OSX-KVM's EFI tree, checked as a whole, and its config.plist.
git clone --quiet --filter=blob:none --no-checkout https://github.com/kholia/OSX-KVM.git "${work}/osx-kvm"
git -C "${work}/osx-kvm" sparse-checkout set --no-cone /OpenCore/EFI/ /OpenCore/config.plist /CREDITS.md "/${FETCH_MACOS_FILE}"
git -C "${work}/osx-kvm" checkout --quiet --detach "${OSX_KVM_COMMIT}"
[[ "$(git -C "${work}/osx-kvm" rev-parse HEAD)" == "${OSX_KVM_COMMIT}" ]]
got="$(cd "${work}/osx-kvm/OpenCore" && find EFI -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
if [[ "${got}" != "${OSX_KVM_EFI_TREE_SHA256}" ]]; then
  echo "fetch-inputs: OSX-KVM EFI tree sha256 ${got}, want ${OSX_KVM_EFI_TREE_SHA256}" >&2
  exit 1
fi
check "${OSX_KVM_CONFIG_SHA256}" "${work}/osx-kvm/OpenCore/config.plist"
cp -a "${work}/osx-kvm/OpenCore/EFI" "${out}/efi/EFI"
rm -f "${out}/efi/EFI/OC/config.plist"
cp "${work}/osx-kvm/OpenCore/config.plist" "${out}/config.plist"
cp "${work}/osx-kvm/CREDITS.md" "${out}/doc/OSX-KVM-CREDITS.md"
# fetch-macOS-v2.py, which `bootdisk recovery` runs unchanged.
check "${FETCH_MACOS_SHA256}" "${work}/osx-kvm/${FETCH_MACOS_FILE}"
mkdir -p "${out}/recovery"
cp "${work}/osx-kvm/${FETCH_MACOS_FILE}" "${out}/recovery/fetch-macOS-v2.py"

# macserial, from OpenCorePkg's sources.
mkdir -p "${work}/macserial"
for entry in "${MACSERIAL_SOURCES[@]}"; do
  f="${entry%%=*}" sum="${entry##*=}"
  raw "acidanthera/OpenCorePkg/${OPENCOREPKG_COMMIT}" "${f}" "${work}/macserial/$(basename "${f}")"
  check "${sum}" "${work}/macserial/$(basename "${f}")"
done
(cd "${work}/macserial" && gcc -O2 -D_ISOC99_SOURCE=1 -I. -o macserial macserial.c UserPseudoRandom.c)
"${work}/macserial/macserial" --num 1 --model iMacPro1,1 | grep -Eq '^[0-9A-Z]{12} \| [0-9A-Z]{17}$'
cp "${work}/macserial/macserial" "${out}/macserial"
cp "${work}/macserial/LICENSE.txt" "${out}/doc/OpenCorePkg-LICENSE.txt"
# OpenCore.efi's further licences, kept with the test data's copy of it.
cp "${here}/../testdata/opencore-1.0.5/APSL-2.0.txt" "${out}/doc/OpenCorePkg-APSL-2.0.txt"
cp "${here}/../testdata/opencore-1.0.5/THIRD-PARTY-NOTICES.txt" "${out}/doc/OpenCorePkg-THIRD-PARTY-NOTICES.txt"

echo upstream >"${out}/origin"
cat >"${out}/env" <<ENV
DOCKERIOS_BOOTDISK_TEMPLATE_COMMIT=${OSX_KVM_COMMIT}
DOCKERIOS_BOOTDISK_EFI_COMMIT=${OSX_KVM_COMMIT}
DOCKERIOS_BOOTDISK_MACSERIAL_COMMIT=${OPENCOREPKG_COMMIT}
ENV

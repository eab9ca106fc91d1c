# SPDX-License-Identifier: GPL-3.0-or-later
#
# The bootdisk image's upstream inputs: each a commit and the sha256 of what
# is taken from it. Sourced by fetch-inputs.sh (which downloads them where
# the network allows) and testdata-inputs.sh (which assembles the subset
# committed as test data, checked against the same pins). Moving a pin means
# changing the commit AND its checksums (README.md, "Updating the pins").

# osx-serial-generator (GPL-3.0): its config-nopicker-custom.plist, installed
# as the alternative template (osx-serial-generator-nopicker.plist).
OSX_SERIAL_GENERATOR_COMMIT=908b3d687a200ca6691750fac967670d76f2a17b
OSX_SERIAL_GENERATOR_TEMPLATE_FILE=config-nopicker-custom.plist
OSX_SERIAL_GENERATOR_TEMPLATE_SHA256=c8546c858e1d67d98e7ea17fc7d90546547792c03209f9990fe50141d393d851
OSX_SERIAL_GENERATOR_LICENSE_SHA256=3972dc9744f6499f0f9b2dbf76696f2ae7ad8af9b23dde66d6af86c9dfb36986

# OSX-KVM: the OpenCore EFI tree (OpenCore/EFI, OpenCore 1.0.5) checked as a
# whole by the sha256 of its manifest
#   find EFI -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
# run in OpenCore/ (what `bootdisk render` records as efiTreeSHA256), and
# OpenCore/config.plist, from which the default template is derived.
OSX_KVM_COMMIT=da4b23b5e92c5b939568700034367e8b7649fe90
OSX_KVM_EFI_TREE_SHA256=9f2e2c5c484db20dd850ba7c9563bd2480ef519d0bb3ddde8a548755af60d072
OSX_KVM_CONFIG_SHA256=3b3c22d8c7f414f4167205319053fd3c76a5ce92fd3f67d54722e58cfe7c783d
# fetch-macOS-v2.py at the same commit, which `bootdisk recovery` runs
# unchanged (installed as /opt/dockerios-bootdisk/recovery/); committed as
# recovery/fetch-macOS-v2.py, which must have this sha256.
FETCH_MACOS_FILE=fetch-macOS-v2.py
FETCH_MACOS_SHA256=39ac6d26bd265f5d32198062f515ad15ef93afb7a74e702be2b008090d5bd5f3

# OpenCorePkg (BSD-3-Clause): macserial, built from these sources.
OPENCOREPKG_COMMIT=170b538b1e998d015fad5310040b24c28b93549e
MACSERIAL_SOURCES=(
  "Utilities/macserial/macserial.c=27976f0cdf0098d9f49bd1c1e02c7b7574249e5a09ce98264e21d33af06d400a"
  "Utilities/macserial/macserial.h=07862ba1796f499ff5accb313c1e61a7a8c1b1b8691cb6f9597619355ff53034"
  "Utilities/macserial/modelinfo.h=f69f40a766bce75949b3de99d6f7b1f6a95655eb971004a86c912c7ae0e1bde1"
  "Utilities/macserial/modelinfo_autogen.h=aa219eb343cf8084ada532690a592b93f80ec9dce5374f8f232d36d4a6ddb375"
  "User/Include/UserPseudoRandom.h=a1e2edc9e6a275ed2f729b27712160e1df8b8250b0b9da15f839e3516451a83b"
  "User/Library/UserPseudoRandom.c=c2478c2e6f23547b164cbbd01ea6d67b0def5d7f77667392156d208522868fd0"
  "LICENSE.txt=4ca709aac88e7b297e794f464d6557203b23a4e92e792b579bb968fef2bce4c4"
)

# The Debian packages whose tools `bootdisk render` runs (sfdisk; mformat,
# mmd, mcopy; qemu-img — internal/builder/image.go) and `bootdisk recovery`
# runs (python3 for fetch-macOS-v2.py; qemu-img), and nothing else: the
# image's userland is these and their dependencies, extracted by mmdebstrap.
# python3, not python3-minimal: the script's urllib.request needs
# http.client and it imports json, which are in libpython3.11-stdlib, not in
# libpython3.11-minimal.
DEBIAN_SUITE=bookworm
DEBIAN_PACKAGES=fdisk,mtools,qemu-utils,python3

# Copyright The DockerIOS Authors.
# SPDX-License-Identifier: GPL-3.0-or-later
#
# TEST ONLY. Put on PYTHONPATH by DockerIOS's tests of `bootdisk recovery`,
# never installed in the image. fetch-macOS-v2.py checks a chunklist's
# signature with pow(signature, 0x10001, Apple_EFI_ROM_public_key_1), and
# no fake recovery service can sign with Apple's private key: that is the one
# thing a fake cannot reproduce. So, in the test's Python only, a pow() whose
# modulus is Apple's key uses the test key's modulus instead; the script runs
# byte for byte unchanged and every other step of its verification (the
# PKCS#1 v1.5 SHA-256 padding it builds, the header and chunk digests, the
# chunk hashes) is the script's own. The product never swaps keys.
#
# DOCKERIOS_TEST_RECOVERY_KEY_SWAP=<Apple's modulus, hex>:<test modulus, hex>
import builtins
import os

_swap = os.environ.get("DOCKERIOS_TEST_RECOVERY_KEY_SWAP")
if _swap:
    _apple, _test = (int(x, 16) for x in _swap.split(":"))
    _pow = builtins.pow

    def _swapping_pow(base, exp, mod=None):
        if mod == _apple:
            mod = _test
        return _pow(base, exp, mod)

    builtins.pow = _swapping_pow

#!/usr/bin/env bash

# Copyright The DockerIOS Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# Regenerates pkg/identity/apple_ouis.txt, the OUIs a MacOSIdentity's MAC
# address may use, from the IEEE MA-L registry as Debian packages it
# (ieee-data). Installs ieee-data with apt-get when it is missing. Review the
# diff and commit the file: it is public registry data, and builds must not
# depend on the network.
#
#   OUI_CSV=...   read another copy of the registry (same CSV layout)
#   OUT=...       write somewhere else (default pkg/identity/apple_ouis.txt)
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
OUI_CSV="${OUI_CSV:-/usr/share/ieee-data/oui.csv}"
OUT="${OUT:-${ROOT}/pkg/identity/apple_ouis.txt}"

# Every spelling of Apple's name in the registry, exactly. If the IEEE ever
# registers Apple under another spelling, the check below fails instead of
# silently leaving those OUIs out: look at the new name and add it here.
APPLE_ORGANIZATIONS=("Apple, Inc.")

if [[ ! -r "${OUI_CSV}" ]]; then
  if [[ "${OUI_CSV}" != /usr/share/ieee-data/oui.csv ]]; then
    echo "error: ${OUI_CSV} is not readable" >&2
    exit 1
  fi
  SUDO=()
  if [[ "$(id -u)" != 0 ]]; then
    SUDO=(sudo)
  fi
  echo "Installing ieee-data (the IEEE OUI registry) with apt-get..." >&2
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq ieee-data >/dev/null
fi

# Name the source precisely: the package version when the registry came from
# ieee-data, and the date the package says it fetched the registry.
SOURCE="${OUI_CSV}"
if [[ "${OUI_CSV}" == /usr/share/ieee-data/oui.csv ]]; then
  VERSION="$(dpkg-query -W -f='${Version}' ieee-data)"
  SOURCE="Debian package ieee-data ${VERSION} (${OUI_CSV})"
fi
SNAPSHOT="unknown"
LASTUPDATE="$(dirname "${OUI_CSV}")/.lastupdate"
if [[ -r "${LASTUPDATE}" ]]; then
  SNAPSHOT="$(date -u -d "@$(tr -d '[:space:]' <"${LASTUPDATE}")" +%F)"
fi

# oui.csv is RFC 4180 CSV with CRLF line ends: Registry,Assignment,
# Organization Name,Organization Address. Names with commas are quoted, and a
# few addresses span lines, so join the physical lines of each record before
# splitting it. mawk has no FPAT, hence the small field splitter.
TMP="$(mktemp)"
trap 'rm -f "${TMP}" "${TMP}.fields"' EXIT
awk '
  function split_csv(rec, f,    n, i, c, inq, cur) {
    n = 0; cur = ""; inq = 0
    for (i = 1; i <= length(rec); i++) {
      c = substr(rec, i, 1)
      if (inq) {
        if (c == "\"" && substr(rec, i + 1, 1) == "\"") { cur = cur "\""; i++ }
        else if (c == "\"") { inq = 0 }
        else { cur = cur c }
      } else if (c == "\"") { inq = 1 }
      else if (c == ",") { f[++n] = cur; cur = "" }
      else { cur = cur c }
    }
    f[++n] = cur
    return n
  }
  {
    sub(/\r$/, "")
    rec = (pending == "" ? $0 : pending "\n" $0)
    if (gsub(/"/, "\"", rec) % 2 == 1) { pending = rec; next }
    pending = ""
    n = split_csv(rec, f)
    if (f[1] == "Registry") next
    print f[1] "\t" f[2] "\t" f[3]
  }
' "${OUI_CSV}" >"${TMP}.fields"

# Refuse to write a list that silently misses an Apple OUI: any MA-L whose
# organization looks like Apple but is not a known spelling stops the script.
UNKNOWN="$(awk -F '\t' -v known="$(printf '%s\n' "${APPLE_ORGANIZATIONS[@]}")" '
  BEGIN { n = split(known, k, "\n"); for (i = 1; i <= n; i++) if (k[i] != "") ok[k[i]] = 1 }
  $1 == "MA-L" && $3 ~ /^[Aa][Pp][Pp][Ll][Ee]([^a-zA-Z]|$)/ && !($3 in ok) { print $3 }
' "${TMP}.fields" | sort -u)"
if [[ -n "${UNKNOWN}" ]]; then
  echo "error: organizations that look like Apple but are not in APPLE_ORGANIZATIONS:" >&2
  echo "${UNKNOWN}" >&2
  exit 1
fi

awk -F '\t' -v known="$(printf '%s\n' "${APPLE_ORGANIZATIONS[@]}")" '
  BEGIN { n = split(known, k, "\n"); for (i = 1; i <= n; i++) if (k[i] != "") ok[k[i]] = 1 }
  $1 == "MA-L" && ($3 in ok) {
    a = toupper($2)
    if (a !~ /^[0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F]$/) { print "bad assignment " $2 > "/dev/stderr"; exit 1 }
    print substr(a, 1, 2) ":" substr(a, 3, 2) ":" substr(a, 5, 2)
  }
' "${TMP}.fields" | LC_ALL=C sort -u >"${TMP}"

COUNT="$(wc -l <"${TMP}" | tr -d '[:space:]')"
if [[ "${COUNT}" -lt 100 ]]; then
  echo "error: only ${COUNT} Apple OUIs found in ${OUI_CSV}; refusing to write a short list" >&2
  exit 1
fi

{
  echo "# OUIs (MA-L assignments) of Apple, Inc. in the IEEE Registration Authority's"
  echo "# MA-L registry: the address blocks a MacOSIdentity's MAC address may come from."
  echo "# Source: ${SOURCE}"
  echo "# Registry snapshot: ${SNAPSHOT}"
  NAMES="$(printf '"%s", ' "${APPLE_ORGANIZATIONS[@]}")"
  echo "# Organization names matched: ${NAMES%, }"
  echo "# Entries: ${COUNT}"
  echo "# Generated by hack/update-apple-ouis.sh; do not edit by hand."
  cat "${TMP}"
} >"${OUT}"
echo "Wrote ${COUNT} Apple OUIs to ${OUT#"${ROOT}"/}" >&2

#!/usr/bin/env bash
# Prints what DockerIOS's binaries are stamped with (pkg/version), taken
# from git, so that every build of one commit says the same:
#
#   go build -ldflags "$(hack/version.sh)" ./cmd/controller
#   hack/version.sh                the -ldflags value (-X ... for each variable)
#   hack/version.sh --git-version  the version alone (an image tag, a release name)
#   hack/version.sh --env          KEY=VALUE lines: GIT_VERSION, GIT_COMMIT, GIT_TREE_STATE, BUILD_DATE
#
# The version is `git describe --tags --always --dirty --match 'v*'`:
# v0.2.0 on a tag, v0.2.0-14-gabcdef0 fourteen commits after it, with
# -dirty when tracked files have uncommitted changes. Before the first tag
# describe gives a bare SHA, which is made v0.0.0-gabcdef0 (the "g" keeps
# a SHA of digits alone a valid semver pre-release; no "+build" part,
# which an image tag cannot hold). The build date is the commit's time in
# UTC, never the clock's, so a rebuild gives the same bytes.
#
# DOCKERIOS_GIT_VERSION=v1.2.3 overrides the version (a release build from
# a checkout whose tag is not there yet); it must be a semver with a "v".
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# The module path: -X names the package by its import path.
MODULE="$(sed -n 's/^module[[:space:]]\{1,\}//p' "${ROOT}/go.mod")"
PKG="${MODULE}/pkg/version"

mode="${1:---ldflags}"
case "${mode}" in
  --ldflags|--git-version|--env) ;;
  *) echo "usage: $0 [--ldflags|--git-version|--env]" >&2; exit 2 ;;
esac

git=(git -C "${ROOT}")
if ! "${git[@]}" rev-parse --verify --quiet HEAD >/dev/null; then
  echo "$0: ${ROOT} is not a git checkout with a commit; the version comes from git" >&2
  exit 1
fi

commit="$("${git[@]}" rev-parse HEAD)"
# Tracked files only, as describe --dirty sees them: an untracked file
# (a build output) does not make a build dirty.
if [[ -z "$("${git[@]}" status --porcelain --untracked-files=no)" ]]; then
  tree_state=clean
else
  tree_state=dirty
fi
build_date="$(TZ=UTC0 "${git[@]}" show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)"

if [[ -n "${DOCKERIOS_GIT_VERSION:-}" ]]; then
  version="${DOCKERIOS_GIT_VERSION}"
else
  version="$("${git[@]}" describe --tags --always --dirty --match 'v*')"
  if [[ "${version}" != v* ]]; then
    version="v0.0.0-g${version}"
  fi
fi
# What semver.org allows, with the "v" Go and Kubernetes write; no build
# metadata ("+..."): the version is also an image tag.
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-((0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?$'
if [[ ! "${version}" =~ ${semver} ]]; then
  echo "$0: version ${version@Q} is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 1
fi

case "${mode}" in
  --git-version)
    echo "${version}"
    ;;
  --env)
    printf 'GIT_VERSION=%s\nGIT_COMMIT=%s\nGIT_TREE_STATE=%s\nBUILD_DATE=%s\n' "${version}" "${commit}" "${tree_state}" "${build_date}"
    ;;
  --ldflags)
    echo "-X ${PKG}.gitVersion=${version} -X ${PKG}.gitCommit=${commit} -X ${PKG}.gitTreeState=${tree_state} -X ${PKG}.buildDate=${build_date}"
    ;;
esac

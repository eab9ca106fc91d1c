#!/usr/bin/env bash
# Runs every test DockerIOS has, as CI does: formatting and vet, the
# generated-code check, unit and storage tests (against embedded etcd), the
# integration tests that drive the real apiserver binary with the real
# kubectl, and the tests behind a real kube-apiserver (test/aggregated;
# test/ledger: the ledger's backup, restore, refusal of an empty ledger
# under the garbage collector, and uninstall), whose etcd, kube-apiserver
# and kube-controller-manager are built from their Go modules on the first
# run (many minutes) and reused after; the
# guest agent (also built for darwin), the hook sidecar (and its generated
# gRPC code, and the hook through real libvirt and QEMU) and the bootdisk
# builder's own module. Needs Go and kubectl; the Debian packages (protoc,
# sfdisk, mtools, qemu-img, libvirt, QEMU, OVMF) are installed by
# hack/install-debian-packages.sh when missing.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
"${ROOT}/hack/ensure-go.sh"
"${ROOT}/hack/install-debian-packages.sh"
export PATH="${PATH}:/usr/sbin:/sbin"
# The hook's libvirt test fails, rather than skips, without libvirt or QEMU.
export DOCKERIOS_REQUIRE_LIBVIRT=1

export KUBECTL="${KUBECTL:-$(command -v kubectl || echo /usr/bin/kubectl)}"
if [[ ! -x "${KUBECTL}" ]]; then
  echo "kubectl is needed for the integration tests (set KUBECTL)." >&2
  exit 1
fi

echo "== gofmt"
unformatted="$(gofmt -l cmd pkg test hack agent sidecar-hook bootdisk examples)"
if [[ -n "${unformatted}" ]]; then
  echo "gofmt would change:" >&2
  echo "${unformatted}" >&2
  exit 1
fi

echo "== go vet"
go vet ./...
# The bootdisk builder is a module of its own (GPL-3.0): ./... never
# reaches it, so it is vetted and tested on its own.
(cd bootdisk && go vet ./...)
# So is the workload-layer example (examples/gitlab-runner), built on the
# public API only.
(cd examples/gitlab-runner && go vet ./...)
# And the checks of artifacts/monitoring, a module of their own with
# Prometheus's code (promtool and the PromQL parser).
(cd hack/prometheus && GOWORK=off go vet ./...)

echo "== generated code"
hack/verify-codegen.sh
hack/verify-protos.sh
hack/verify-upstream-crds.sh
examples/gitlab-runner/hack/verify-codegen.sh

echo "== build"
# The guest agent runs in macOS guests: it must build for them, without cgo.
GOOS=darwin GOARCH=amd64 CGO_ENABLED=0 go build ./agent/...
GOOS=darwin GOARCH=amd64 go vet ./agent/...
# Stamped with DockerIOS's version from git (pkg/version), as a release is.
ldflags="$(hack/version.sh)"
go build -ldflags "${ldflags}" -o bin/dockerios-apiserver ./cmd/apiserver
go build -ldflags "${ldflags}" -o bin/kubectl-dockerios ./cmd/kubectl-dockerios
go build -ldflags "${ldflags}" -o bin/dockerios-controller ./cmd/controller
go build -ldflags "${ldflags}" -o bin/dockerios-agent ./agent/cmd/dockerios-agent
export DOCKERIOS_APISERVER_BIN="${ROOT}/bin/dockerios-apiserver"
export DOCKERIOS_CONTROLLER_BIN="${ROOT}/bin/dockerios-controller"
export DOCKERIOS_AGENT_BIN="${ROOT}/bin/dockerios-agent"
export DOCKERIOS_KUBECTL_PLUGIN_BIN="${ROOT}/bin/kubectl-dockerios"
hack/build-control-plane.sh
export DOCKERIOS_ETCD_BIN="${ROOT}/bin/etcd"
export DOCKERIOS_KUBE_APISERVER_BIN="${ROOT}/bin/kube-apiserver"
export DOCKERIOS_KUBE_CONTROLLER_MANAGER_BIN="${ROOT}/bin/kube-controller-manager"
hack/build-promtool.sh
export DOCKERIOS_PROMTOOL_BIN="${ROOT}/bin/promtool"

echo "== tests"
# Registry and integration tests start etcd and apiserver processes; two
# packages at a time keeps a 2-core machine responsive.
# test/node runs on its own, below, once the images and releases exist.
go test -count=1 -p 2 -timeout 30m "$@" $(go list ./... | grep -v -e '/test/node$' -e '/test/ha$' -e '/test/docs$')
# Protobuf storage, which an operator may choose (--storage-media-type,
# docs/operators/upgrade.md): the model test (two replicas on one etcd,
# kills, every invariant checked against etcd itself) and the claim bursts
# again, every apiserver they start storing in protobuf.
DOCKERIOS_TEST_STORAGE_MEDIA_TYPE=application/vnd.kubernetes.protobuf \
  go test -count=1 -timeout 20m "$@" -run 'TestModel|TestClaimBurst_BindsExactlyMinNMEveryRun' ./test/integration/
# The docs' own commands (README.md, docs/users/), each page on a fresh
# stack from hack/local-up.sh: alone, since that stack lives in the fixed
# .dockerios/ the docs name and runs a whole control plane. It fails if a
# local stack is already up there. local-up.sh rebuilds bin/dockerios-*
# without the version stamp; nothing after this checks it.
go test -count=1 -timeout 40m "$@" ./test/docs/
# artifacts/ha on this machine (three etcd members, three apiserver
# replicas, kube-apiserver): alone, so that no other package's processes
# starve its etcd into elections of its own while it counts failed
# requests (about two minutes).
go test -count=1 -timeout 10m "$@" ./test/ha/
(cd bootdisk && go test -count=1 -timeout 10m "$@" ./...)
# The alerting rules' unit tests (promtool test rules, each also broken on
# purpose to prove it fails) and the dashboard's and rules' metrics.
(cd hack/prometheus && GOWORK=off go test -count=1 -timeout 5m "$@" ./...)
# The example's unit tests and its end-to-end test on the whole stack.
(cd examples/gitlab-runner && go test -count=1 -timeout 20m "$@" ./...)

# The images (hack/images.sh), built twice from scratch to prove the same
# commit gives the same digests, then the release on a real node: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, containerd and a
# kubelet in namespaces of the test's own (test/node). The upgrade starts
# from release N-1, made by the same scripts with another version (the
# binaries and labels say it, so every digest differs).
echo "== images and releases"
(cd hack/imagebuild && GOWORK=off DOCKERIOS_IMAGES_REPRODUCIBLE=1 go test -count=1 -timeout 20m "$@" ./...)
hack/build-control-plane.sh kube-scheduler kubelet
export DOCKERIOS_KUBE_SCHEDULER_BIN="${ROOT}/bin/kube-scheduler"
export DOCKERIOS_KUBELET_BIN="${ROOT}/bin/kubelet"
current="$(hack/version.sh --git-version)"
OUTPUT="${ROOT}/_output/images-previous" RELEASE_DIR="${ROOT}/_output/release-previous" \
  hack/release.sh "${current%-dirty}-previous"
hack/release.sh
IMAGES=gitlab-runner-controller hack/images.sh # the example's image, built and listed beside the release's
echo "== node"
DOCKERIOS_REQUIRE_NODE=1 \
  DOCKERIOS_PREVIOUS_RELEASE_DIR="${ROOT}/_output/release-previous" \
  DOCKERIOS_PREVIOUS_IMAGES_DIR="${ROOT}/_output/images-previous" \
  go test -count=1 -timeout 30m "$@" ./test/node/

# Every fuzz target also runs for a while on fresh random input, beyond its
# seed corpus (which the tests above already ran). FUZZTIME=0 skips this.
FUZZTIME="${FUZZTIME:-8s}"
if [[ "${FUZZTIME}" != "0" ]]; then
  echo "== fuzz (${FUZZTIME} each)"
  while read -r dir; do
    for target in $(grep -h -o '^func Fuzz[A-Za-z0-9_]*' "${dir}"/*_test.go | sed 's/^func //'); do
      echo "-- ${dir} ${target}"
      # A failure is retried once: Go's fuzzer can report its own worker
      # timing out at the deadline (golang/go#51484). A real finding is
      # saved under testdata/fuzz and fails the retry at once.
      if ! out="$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME}" "./${dir}" 2>&1)" &&
         ! out="$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME}" "./${dir}" 2>&1)"; then
        echo "${out}" >&2
        exit 1
      fi
    done
  done < <(grep -l -r --include='*_test.go' '^func Fuzz' pkg agent sidecar-hook | xargs -n1 dirname | sort -u)
fi

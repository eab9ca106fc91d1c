#!/usr/bin/env bash
# Brings the whole DockerIOS stack up on this machine, in the background:
# etcd, kube-apiserver and kube-controller-manager; the DockerIOS apiserver
# behind kube-apiserver (its APIService); the DockerIOS controller; the test
# harness playing KubeVirt, CDI, the Job controller and the macOS guests
# (each guest runs the real agent binary, and serves SSH); a demo pool and
# claim in namespace "demo"; and the workload-layer example's controller
# with a fake GitLab (examples/gitlab-runner), so that
# `kubectl apply -f examples/gitlab-runner/deploy/` registers runners. It
# is bin/localstack (hack/localstack), built here.
#
# The first run builds etcd, kube-apiserver and kube-controller-manager from
# source (hack/build-control-plane.sh, ~10 minutes); later runs reuse bin/.
# The stack's state lives for one run only: hack/local-down.sh stops it and
# nothing is kept but the logs.
#
#   DATA_DIR=...         state directory: kubeconfig, pid, logs, this run's
#                        files (default .dockerios/)
#   KUBECTL=...          the kubectl to use (default: kubectl on PATH)
#   LOCALSTACK_ARGS=...  extra flags for bin/localstack (bin/localstack --help),
#                        e.g. "--no-demo", "--no-example" or "--boot-delay=10s"
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
DATA_DIR="${DATA_DIR:-${ROOT}/.dockerios}"
PID_FILE="${DATA_DIR}/localstack.pid"
LOG_FILE="${DATA_DIR}/localstack.log"
KUBECONFIG_FILE="${DATA_DIR}/admin.kubeconfig"
KUBECTL="${KUBECTL:-$(command -v kubectl || echo /usr/bin/kubectl)}"
WAIT_SECONDS=180

"${ROOT}/hack/ensure-go.sh"
# The same Debian packages as the tests (one list, one script): nothing is
# installed when they are there.
"${ROOT}/hack/install-debian-packages.sh"
if [[ ! -x "${KUBECTL}" ]]; then
  echo "kubectl is needed (set KUBECTL)." >&2
  exit 1
fi

usage() {
  cat <<MSG

DockerIOS is up (log: ${LOG_FILE}).
$(cat "${DATA_DIR}/endpoints.txt" 2>/dev/null | sed 's/^/  /')

Use it with kubectl:

  export KUBECONFIG=${KUBECONFIG_FILE}
  kubectl get mm -n demo -w          # machines: Pending -> Provisioning -> Starting -> Ready
  kubectl get mmclaim -n demo        # the claim build-1, Bound to a machine
  kubectl get mmpool -n demo         # the warm pool: replicas, ready, bound
  kubectl describe mm -n demo        # conditions and events of each machine
  kubectl delete mmclaim build-1 -n demo   # its machine is disposed of

  kubectl apply -f examples/gitlab-runner/deploy/   # two GitLab runners on warm Macs
  kubectl get glr,mmclaim -n demo                   #   (docs/users/workloads.md)

hack/local-down.sh stops it.
MSG
}

if [[ -f "${PID_FILE}" ]] && kill -0 "$(cat "${PID_FILE}")" 2>/dev/null; then
  echo "DockerIOS is already running (pid $(cat "${PID_FILE}")); hack/local-down.sh stops it."
  usage
  exit 0
fi

echo "== Control plane: etcd, kube-apiserver, kube-controller-manager (built from source on the first run, ~10 minutes)"
"${ROOT}/hack/build-control-plane.sh"

echo "== DockerIOS: apiserver, controller, guest agent, localstack"
for target in dockerios-apiserver:./cmd/apiserver dockerios-controller:./cmd/controller \
  dockerios-agent:./agent/cmd/dockerios-agent localstack:./hack/localstack; do
  echo "build   bin/${target%%:*}"
  go build -o "${ROOT}/bin/${target%%:*}" "${target#*:}"
done
# The workload-layer example is a Go module of its own.
for target in gitlab-runner-controller fake-gitlab; do
  echo "build   bin/${target} (examples/gitlab-runner)"
  (cd "${ROOT}/examples/gitlab-runner" && go build -o "${ROOT}/bin/${target}" "./cmd/${target}")
done

export KUBECTL
export DOCKERIOS_APISERVER_BIN="${ROOT}/bin/dockerios-apiserver"
export DOCKERIOS_CONTROLLER_BIN="${ROOT}/bin/dockerios-controller"
export DOCKERIOS_AGENT_BIN="${ROOT}/bin/dockerios-agent"
export DOCKERIOS_ETCD_BIN="${ROOT}/bin/etcd"
export DOCKERIOS_KUBE_APISERVER_BIN="${ROOT}/bin/kube-apiserver"
export DOCKERIOS_KUBE_CONTROLLER_MANAGER_BIN="${ROOT}/bin/kube-controller-manager"

mkdir -p "${DATA_DIR}"
rm -f "${KUBECONFIG_FILE}" "${DATA_DIR}/endpoints.txt"
# localstack runs in a session (and process group) of its own, so that
# hack/local-down.sh can stop everything it started, and a Ctrl-C here does
# not reach it.
launcher=()
if command -v setsid >/dev/null 2>&1; then
  launcher=(setsid)
fi
# shellcheck disable=SC2086 # LOCALSTACK_ARGS is a list of flags
"${launcher[@]}" nohup "${ROOT}/bin/localstack" --state-dir "${DATA_DIR}" ${LOCALSTACK_ARGS:-} \
  >"${LOG_FILE}" 2>&1 </dev/null &
echo $! >"${PID_FILE}"
pid="$(cat "${PID_FILE}")"

echo "== Starting the stack (pid ${pid}, log ${LOG_FILE}) ..."
trap 'echo "Interrupted; stopping the stack." >&2; "${ROOT}/hack/local-down.sh"; exit 130' INT TERM
shown=0
ready=""
for _ in $(seq 1 "${WAIT_SECONDS}"); do
  # Show what localstack has done so far.
  lines="$(wc -l <"${LOG_FILE}")"
  if ((lines > shown)); then
    # Its own steps only: not the harness's actions, nor the summary
    # printed below.
    sed -n "$((shown + 1)),${lines}p" "${LOG_FILE}" | grep -E '^[0-9]{4}/' | grep -v ' harness: ' | sed 's/^/  | /' || true
    shown="${lines}"
  fi
  if ! kill -0 "${pid}" 2>/dev/null; then
    echo "The stack exited while starting; its log (${LOG_FILE}) ends with:" >&2
    tail -n 40 "${LOG_FILE}" >&2
    rm -f "${PID_FILE}"
    exit 1
  fi
  if [[ -f "${KUBECONFIG_FILE}" ]] &&
    "${KUBECTL}" --kubeconfig "${KUBECONFIG_FILE}" get --raw /apis/dockerios.io/v1alpha1 >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 1
done
if [[ -z "${ready}" ]]; then
  echo "The stack did not come up within ${WAIT_SECONDS}s; its log (${LOG_FILE}) ends with:" >&2
  tail -n 40 "${LOG_FILE}" >&2
  "${ROOT}/hack/local-down.sh" >&2
  exit 1
fi
trap - INT TERM
usage

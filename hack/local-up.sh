#!/usr/bin/env bash
# Brings DockerIOS up on this machine for development: builds the apiserver
# and starts it in --local mode (HTTPS on 127.0.0.1, its own CA and admin
# certificate, embedded etcd) in the background, with its state in .dockerios/.
# Objects survive restarts. Stop it with hack/local-down.sh.
#
#   PORT=9443       the HTTPS port
#   DATA_DIR=...    where etcd data, certificates, kubeconfig and log live
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
PORT="${PORT:-9443}"
DATA_DIR="${DATA_DIR:-${ROOT}/.dockerios}"
PID_FILE="${DATA_DIR}/apiserver.pid"
LOG_FILE="${DATA_DIR}/apiserver.log"
KUBECONFIG_FILE="${DATA_DIR}/admin.kubeconfig"
KUBECTL="${KUBECTL:-kubectl}"

"${ROOT}/hack/ensure-go.sh"

if [[ -f "${PID_FILE}" ]] && kill -0 "$(cat "${PID_FILE}")" 2>/dev/null; then
  echo "DockerIOS is already running (pid $(cat "${PID_FILE}")); hack/local-down.sh stops it."
else
  echo "Building bin/dockerios-apiserver ..."
  go build -o "${ROOT}/bin/dockerios-apiserver" ./cmd/apiserver
  mkdir -p "${DATA_DIR}"
  rm -f "${KUBECONFIG_FILE}"
  nohup "${ROOT}/bin/dockerios-apiserver" --local --data-dir "${DATA_DIR}" --secure-port "${PORT}" \
    >"${LOG_FILE}" 2>&1 </dev/null &
  echo $! >"${PID_FILE}"

  echo "Waiting for DockerIOS to be ready on https://127.0.0.1:${PORT} ..."
  for _ in $(seq 1 120); do
    if ! kill -0 "$(cat "${PID_FILE}")" 2>/dev/null; then
      echo "The apiserver exited; its log (${LOG_FILE}) ends with:" >&2
      tail -n 20 "${LOG_FILE}" >&2
      rm -f "${PID_FILE}"
      exit 1
    fi
    if [[ -f "${KUBECONFIG_FILE}" ]] && "${KUBECTL}" --kubeconfig "${KUBECONFIG_FILE}" get --raw /readyz >/dev/null 2>&1; then
      break
    fi
    sleep 1
  done
  if ! "${KUBECTL}" --kubeconfig "${KUBECONFIG_FILE}" get --raw /readyz >/dev/null 2>&1; then
    echo "DockerIOS did not become ready within 2 minutes; see ${LOG_FILE}" >&2
    exit 1
  fi
fi

cat <<MSG

DockerIOS is up: https://127.0.0.1:${PORT} (log: ${LOG_FILE})
Use it with kubectl:

  kubectl --kubeconfig ${KUBECONFIG_FILE} api-resources --api-group=dockerios.io

or, for the whole shell session:

  export KUBECONFIG=${KUBECONFIG_FILE}
  kubectl apply -f artifacts/examples/
  kubectl get dockerios

Stop it with hack/local-down.sh; your objects are kept in ${DATA_DIR}.
MSG

#!/usr/bin/env bash
# Stops the DockerIOS stack hack/local-up.sh started: SIGTERM to
# bin/localstack, which stops the guests' agents, the controller, the
# apiservers and etcd in turn; after a minute, SIGKILL to its whole process
# group. The stack's objects do not survive this; its logs stay in the state
# directory (.dockerios/ or DATA_DIR).
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
DATA_DIR="${DATA_DIR:-${ROOT}/.dockerios}"
PID_FILE="${DATA_DIR}/localstack.pid"

# kill_leftovers PID: SIGKILL what is left of the process group PID leads
# (localstack runs as a group leader; see hack/local-up.sh), limited to this
# checkout's binaries so that a reused pid can never take anything else.
kill_leftovers() {
  local left
  left="$(pgrep -g "$1" -f "^${ROOT}/bin/" || true)"
  if [[ -n "${left}" ]]; then
    echo "Killing what is left of the stack: $(echo "${left}" | tr '\n' ' ')" >&2
    # shellcheck disable=SC2086 # one pid a word
    kill -KILL ${left} 2>/dev/null || true
  fi
}

if [[ ! -f "${PID_FILE}" ]]; then
  echo "DockerIOS is not running."
  exit 0
fi
pid="$(cat "${PID_FILE}")"
if ! kill -0 "${pid}" 2>/dev/null; then
  echo "DockerIOS is not running (pid ${pid} has exited; see ${DATA_DIR}/localstack.log)."
  kill_leftovers "${pid}"
  rm -f "${PID_FILE}" "${DATA_DIR}/admin.kubeconfig" "${DATA_DIR}/endpoints.txt"
  exit 0
fi

echo "Stopping DockerIOS (pid ${pid}) ..."
kill -TERM "${pid}"
for _ in $(seq 1 60); do
  kill -0 "${pid}" 2>/dev/null || break
  sleep 1
done
if kill -0 "${pid}" 2>/dev/null; then
  echo "The stack (pid ${pid}) did not stop within a minute; killing it." >&2
  if [[ "$(ps -o pgid= -p "${pid}" | tr -d ' ')" == "${pid}" ]]; then
    kill -KILL -- "-${pid}" 2>/dev/null || true
  else
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  for _ in $(seq 1 10); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 1
  done
fi
kill_leftovers "${pid}"
# localstack removes these itself when it stops cleanly.
rm -f "${PID_FILE}" "${DATA_DIR}/admin.kubeconfig" "${DATA_DIR}/endpoints.txt"
echo "DockerIOS stopped; logs kept in ${DATA_DIR}."

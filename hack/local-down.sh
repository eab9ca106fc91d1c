#!/usr/bin/env bash
# Stops the DockerIOS apiserver started by hack/local-up.sh. Its data stays
# in .dockerios/ for the next start; delete that directory to start afresh.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
DATA_DIR="${DATA_DIR:-${ROOT}/.dockerios}"
PID_FILE="${DATA_DIR}/apiserver.pid"

if [[ ! -f "${PID_FILE}" ]] || ! kill -0 "$(cat "${PID_FILE}")" 2>/dev/null; then
  echo "DockerIOS is not running."
  rm -f "${PID_FILE}"
  exit 0
fi
pid="$(cat "${PID_FILE}")"
kill -TERM "${pid}"
for _ in $(seq 1 60); do
  kill -0 "${pid}" 2>/dev/null || break
  sleep 1
done
if kill -0 "${pid}" 2>/dev/null; then
  echo "The apiserver (pid ${pid}) did not stop within a minute; killing it." >&2
  kill -KILL "${pid}"
fi
rm -f "${PID_FILE}"
echo "DockerIOS stopped; data kept in ${DATA_DIR}."

#!/usr/bin/env bash
# Start dockerd in the background unless a daemon already answers; wait a bounded time.
set -euo pipefail
if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "start-docker: dockerd is not installed (apt-get install -y docker.io)" >&2
  exit 1
fi
log=/var/log/reb-ray-dockerd.log
echo "start-docker: starting dockerd (log: $log)"
nohup dockerd >"$log" 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "start-docker: dockerd did not answer within 60 s; last log lines:" >&2
tail -n 5 "$log" >&2 || true
exit 1

#!/usr/bin/env bash
# Is the load test fast enough not to be the bottleneck? Both it and wrk send
# GET /healthz through nginx to the replicas with the same concurrency, in one
# run, on the same machine; the ratio of their requests/s is the answer.
# Starts the local cluster if it is not up, and stops it again if it started it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PORT=${PORT:-80}
CONC=${CONC:-64}
SECONDS_WRK=${SECONDS_WRK:-5}
url="http://127.0.0.1:$PORT/healthz"

if ! command -v wrk >/dev/null; then
  if [ -f /etc/debian_version ]; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "bench: installing wrk with apt-get" >&2
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk >/dev/null
  else
    echo "bench: wrk is missing: install it (brew install wrk, dnf install wrk)" >&2; exit 1
  fi
fi

started=0
if ! curl -fsS "$url" >/dev/null 2>&1; then
  go run ./cmd/cluster up
  started=1
fi
cleanup() { if [ $started = 1 ]; then go run ./cmd/cluster down; fi; }
trap cleanup EXIT

go build -o "${RUN_DIR:-$root/.run}/bin/loadtest" ./loadtest
echo "bench: wrk -t2 -c$CONC -d${SECONDS_WRK}s $url" >&2
wrk_rps=$(wrk -t2 -c"$CONC" -d"${SECONDS_WRK}s" "$url" | awk '/^Requests\/sec:/ { print $2 }')
# As many requests as wrk made, so both run for about as long.
n=$(awk -v r="$wrk_rps" -v s="$SECONDS_WRK" 'BEGIN { printf "%d", r * s }')
echo "bench: loadtest -plain -n $n -c $CONC -url $url" >&2
lt_rps=$("${RUN_DIR:-$root/.run}/bin/loadtest" -plain -json -n "$n" -c "$CONC" -url "$url" | grep -o '"requests_per_sec":[0-9.e+]*' | cut -d: -f2)
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
awk -v w="$wrk_rps" -v l="$lt_rps" -v c="$CONC" -v cores="$(nproc)" -v cpu="$cpu" 'BEGIN {
  printf "GET /healthz through nginx, c=%d, %d cores (%s)\n", c, cores, cpu
  printf "  wrk       %8.0f requests/s\n", w
  printf "  loadtest  %8.0f requests/s\n", l
  printf "  ratio loadtest/wrk = %.2f\n", l / w
}'

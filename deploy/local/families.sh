#!/usr/bin/env bash
# make families: the four families of seed 004 on the same load, in one run:
# the Redis locks (v6 on one node, redlock on three), etcd, ZooKeeper (zk)
# and the database (db). Each version gets the same load test through nginx
# (N requests, C at a time, as much stock as requests, so every request
# sells), and the requests its lock's servers handled meanwhile are read
# from the servers' own counters, before and after: Redis'
# total_commands_processed, etcd's gRPC calls handled, ZooKeeper's packets
# received, MariaDB's Questions. The stock's GET and SET (two Redis commands
# a sale, every version) are counted apart. LOCKS picks the versions (a
# version, or VERSION:WAIT for its -wait). Starts the local cluster with
# -work 0 when it is not up, and stops it again if it started it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
RUN_DIR=${RUN_DIR:-$root/.run}
PORT=${PORT:-80}
N=${N:-2000}
C=${C:-64}
LOCKS=${LOCKS:-v6 redlock etcd zk db-seed db}
url="http://127.0.0.1:$PORT/sale"
say() { printf 'families: %s\n' "$*" >&2; }

started=0
if ! curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; then
  WORK=0 RUN_DIR="$RUN_DIR" PORT="$PORT" go run ./cmd/cluster up
  started=1
fi
cleanup() { if [ $started = 1 ]; then RUN_DIR="$RUN_DIR" PORT="$PORT" go run ./cmd/cluster down; fi; }
trap cleanup EXIT

state="$RUN_DIR/cluster.json"
REDISCLI_AUTH=$(sed -n 's/.*"redis_password": "\([^"]*\)".*/\1/p' "$state")
if [ -n "$REDISCLI_AUTH" ]; then export REDISCLI_AUTH; else unset REDISCLI_AUTH; fi
# addrs KIND: the state file's addresses of that kind of process.
addrs() { grep -o "\"addr\": \"127.0.0.1:[0-9]*\"" "$state" | cut -d'"' -f4 | grep -E "$1" || true; }

redis_count() { # the commands all three Redis nodes processed
  local sum=0 a n
  for a in 127.0.0.1:6381 127.0.0.1:6382 127.0.0.1:6383; do
    n=$(redis-cli -h "${a%:*}" -p "${a#*:}" --no-auth-warning info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p')
    sum=$((sum + n))
  done
  echo "$sum"
}
etcd_count() { # the gRPC calls every member handled
  local sum=0 a n
  for a in $(addrs ':(1|2|3)2379$'); do
    n=$(curl -fsS "http://$a/metrics" | awk '/^grpc_server_handled_total/ {s += $2} END {printf "%d", s}')
    sum=$((sum + n))
  done
  echo "$sum"
}
zk_count() { # the packets every member received from clients
  local sum=0 a n
  for a in $(addrs ':(1|2|3)2181$'); do
    n=$(exec 3<>"/dev/tcp/${a%:*}/${a#*:}"; printf mntr >&3; sed -n 's/^zk_packets_received[[:space:]]*//p' <&3)
    sum=$((sum + n))
  done
  echo "$sum"
}
db_count() { # the statements MariaDB ran
  mariadb --socket="$RUN_DIR/mariadb.sock" -N -B -e "SHOW GLOBAL STATUS LIKE 'Questions'" | awk '{print $2}'
}
server() { # the servers whose counters say what lock $1 cost
  case $1 in
    v3|v4|v5|v6|v7|v8|redlock|redislock|rueidislock*) echo redis ;;
    etcd) echo etcd ;;
    zk) echo zk ;;
    db|db-seed) echo db ;;
    *) say "no counter for -lock $1 (none, v1, v2 and atomic take no lock in a server)"; exit 2 ;;
  esac
}

# field LINE NAME: a number from loadtest -json.
field() { echo "$1" | grep -o "\"$2\":-\?[0-9.]*" | head -1 | cut -d: -f2; }

printf '| `-lock` | sold | sales/s | p50 ms | p99 ms | max ms | oversold | linearizable | requests to the lock'"'"'s servers / sale |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---|---|\n'
for entry in $LOCKS; do # a version, or VERSION:WAIT (v6:handoff)
  lock=${entry%%:*} wait=()
  [ "$entry" = "$lock" ] || wait=(-wait "${entry#*:}")
  s=$(server "$lock") || exit 2
  before=$("${s}_count")
  out=$(go run ./loadtest -url "$url" -run-dir "$RUN_DIR" -lock "$lock" "${wait[@]}" -n "$N" -c "$C" -stock "$N" -json)
  after=$("${s}_count")
  sold=$(field "$out" sold)
  if [ "$s" = redis ]; then # the stock's GET and SET are Redis commands too
    per=$(awk -v d=$((after - before)) -v n="$sold" 'BEGIN {printf "%.1f Redis commands (%.1f with the stock'"'"'s GET and SET)", d / n - 2, d / n}')
  else
    per=$(awk -v d=$((after - before)) -v n="$sold" -v s="$s" 'BEGIN {printf "%.1f to %s (and the stock'"'"'s GET and SET in Redis)", d / n, s}')
  fi
  printf '| `%s` | %s | %.0f | %.1f | %.1f | %.1f | %s | %s | %s |\n' "${entry/:/ -wait }" "$sold" "$(field "$out" sales_per_sec)" \
    "$(field "$out" p50)" "$(field "$out" p99)" "$(field "$out" max)" "$(field "$out" oversold)" \
    "$(echo "$out" | grep -q '"linearizable":true' && echo ok || echo no)" "$per"
done

#!/usr/bin/env bash
# make scenarios-compose: the fault scenarios against the Docker Compose
# stack, with no registry. Builds the offline images (OFFLINE=0: the
# registry's), brings the stack up with deploy/docker-compose.scenarios.yml
# (the fault hooks, a 2 s lease, each Redis node, etcd and ZooKeeper member and
# the database on a fixed loopback port; the replicas reached through nginx's
# /replica/NAME/), runs `go run ./loadtest -compose PROJECT -scenario
# SCENARIO` from this machine, and tears everything down, whatever happens.
# The scenarios that need the local cluster's fault proxies, clock shim or
# restart arguments are skipped, each with its reason.
#
# REUSE=1: the project is up already (make e2e-compose runs this at its end):
# no image build, no teardown (the caller's). COMPOSE, PORT, ADMIN_TOKEN,
# REDIS_PASSWORD as in the Compose file (ADMIN_TOKEN: a random one when not
# set; the fault hooks answer to it; REDIS_PASSWORD: when not set, the one
# the stack made, which the load test reads from it); SCENARIO_PORT_* move
# the fixed ports. The load test gets both secrets through its environment:
# never on a command line, which every user of the machine can read.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. deploy/e2e-lib.sh
PROJECT=${PROJECT:-locklab-scenarios}
SCENARIO=${SCENARIO:-all}
say() { printf 'scenarios-compose: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

if [ -z "${COMPOSE:-}" ]; then
  if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"
  elif command -v docker-compose >/dev/null; then COMPOSE=docker-compose
  else fail "no Compose tool: install the docker compose plugin (or Debian's docker-compose)"; fi
fi
export ADMIN_TOKEN=${ADMIN_TOKEN:-$(random)} REDIS_PASSWORD=${REDIS_PASSWORD:-}
files=(-f docker-compose.yml)
[ "${OFFLINE:-1}" = 0 ] || files+=(-f deploy/offline/docker-compose.offline.yml)
files+=(-f deploy/docker-compose.scenarios.yml)
dc() { $COMPOSE -p "$PROJECT" "${files[@]}" "$@"; }

if [ "${REUSE:-0}" != 1 ]; then
  PORT=${PORT:-18080}
  while port_taken "$PORT"; do PORT=$((PORT + 1)); done
  export PORT
  # The fixed ports (see deploy/docker-compose.scenarios.yml) must be free.
  for v in REDIS1:27381 REDIS2:27382 REDIS3:27383 ETCD1:27391 ETCD2:27392 ETCD3:27393 ZK1:27281 ZK2:27282 ZK3:27283 MARIADB:27306; do
    name=SCENARIO_PORT_${v%%:*}
    port=${!name:-${v#*:}}
    if port_taken "$port"; then fail "port $port ($name) is taken: free it or set $name"; fi
  done
  cleanup() {
    local status=$?
    dc --profile loadtest down -v --remove-orphans >/dev/null 2>&1 || true
    say "torn down (project $PROJECT)"
    exit $status
  }
  trap cleanup EXIT
  [ "${OFFLINE:-1}" = 0 ] || bash deploy/offline/build-images.sh
fi
base="http://127.0.0.1:${PORT:?PORT: the port nginx is published on}"

say "$COMPOSE up -d with deploy/docker-compose.scenarios.yml (the fault hooks on, ports on loopback)"
dc up -d --build 2>&1 | sed 's/^/  /' >&2 || fail "up -d returned $?"
# The replicas were (re)created: wait until a sale can go through nginx (it
# finds them in Docker's DNS within a second of their start).
for _ in $(seq 60); do curl -fsS -o /dev/null "$base/readyz" 2>/dev/null && break; sleep 1; done
curl -fsS -o /dev/null "$base/readyz" || fail "no replica ready through nginx 60 s after up"

say "go run ./loadtest -compose $PROJECT -scenario $SCENARIO"
INVENTORY_ADMIN_TOKEN=$ADMIN_TOKEN INVENTORY_REDIS_PASSWORD=$REDIS_PASSWORD go run ./loadtest -url "$base/sale" -compose "$PROJECT" \
  -scenario "$SCENARIO" ${SCENARIO_FLAGS:-} || fail "the scenarios on Compose differ from what is expected (above)"
say "PASS"

#!/usr/bin/env bash
# make e2e-swarm: deploy/stack.yml on a one-node Docker Swarm, end to end,
# with no registry. Makes the engine a swarm on loopback if it is in none
# (and leaves that swarm at the end), labels the node for every store,
# builds the offline images, deploys the stack, and checks that: nginx
# (published in host mode) spreads requests over both replicas; the load
# test, run in a container on the stack's network, shows v2 oversell and
# v1 (on one replica), v6 and redlock not, with the checker's evidence;
# `docker service scale` to four replicas is followed by nginx with no
# restart, four replicas serve the load, every one's history checked; a
# rolling update of the replicas under load loses no sale. Then it removes
# the stack and checks that no service, container, network or config is
# left; the node's labels and the swarm go as they came.
#
# Skips, saying why, where the engine cannot run a swarm (or is a worker of
# another). PROJECT names the stack (locklab-e2e-swarm).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. deploy/e2e-lib.sh
PROJECT=${PROJECT:-locklab-e2e-swarm}
say() { printf 'e2e-swarm: %s\n' "$*" >&2; }
failure=""
fail() { failure="$*"; say "FAIL: $*"; exit 1; }

docker info >/dev/null 2>&1 || { say "SKIPPED: no Docker engine answers 'docker info'"; exit 0; }
made_swarm=0 node="" labels=()
PORT=${E2E_PORT:-18180}
while port_taken "$PORT"; do PORT=$((PORT + 1)); done
# The Redis password: a Docker secret of this run's, made before the deploy
# (the stack reads it, named REDIS_PASSWORD_SECRET) and removed after.
ADMIN_TOKEN=$(random) REDIS_PASSWORD_SECRET=${PROJECT}_redis_password
export PORT LOCK=v1 ADMIN_TOKEN REDIS_PASSWORD_SECRET REPLICAS=2
base="http://127.0.0.1:$PORT"

leftovers() {
  {
    docker service ls -q --filter "label=com.docker.stack.namespace=$PROJECT"
    docker ps -aq --filter "label=com.docker.stack.namespace=$PROJECT"
    docker network ls -q --filter "label=com.docker.stack.namespace=$PROJECT"
    docker config ls -q --filter "label=com.docker.stack.namespace=$PROJECT"
  } 2>/dev/null
}
# Whatever happens from here on: the stack removed and checked gone, the
# labels this run set removed, and the swarm it made left, in that order.
cleanup() {
  local status=$? left=""
  if [ $status -ne 0 ] && [ -n "$(docker service ls -q --filter "label=com.docker.stack.namespace=$PROJECT" 2>/dev/null)" ]; then
    say "the services' tasks and logs of the failed run:"
    docker stack ps --no-trunc "$PROJECT" >&2 2>/dev/null || true
    for s in inventory nginx redis1 lab; do
      docker service logs --tail 10 "${PROJECT}_$s" >&2 2>/dev/null || true
    done
  fi
  [ -z "$failure" ] || say "FAIL (said above, before the logs): $failure"
  docker stack rm "$PROJECT" >/dev/null 2>&1 || true
  # Removal is asynchronous: wait for the containers and the network to go.
  for _ in $(seq 60); do [ -z "$(leftovers)" ] && break; sleep 1; done
  left=$(leftovers | tr '\n' ' ')
  docker secret rm "$REDIS_PASSWORD_SECRET" >/dev/null 2>&1 || true
  [ -z "$(docker secret ls -q --filter "name=$REDIS_PASSWORD_SECRET" 2>/dev/null)" ] || left="$left secret $REDIS_PASSWORD_SECRET"
  for key in "${labels[@]}"; do docker node update --label-rm "$key" "$node" >/dev/null 2>&1 || true; done
  # docker_gwbridge, the bridge a swarm makes for its containers' way out,
  # stays after leaving: the engine keeps it for the next swarm.
  if [ "$made_swarm" = 1 ]; then docker swarm leave --force >/dev/null 2>&1 || true; fi
  if [ -n "$left" ]; then
    say "FAIL: left behind after stack rm: $left"
    exit 1
  fi
  say "removed: no service, container, network, config or secret of stack $PROJECT is left$([ "$made_swarm" = 1 ] && echo ", and the swarm is left")"
  exit $status
}
trap cleanup EXIT

state=$(docker info --format '{{.Swarm.LocalNodeState}}')
case "$state" in
  inactive)
    if ! out=$(docker swarm init --advertise-addr 127.0.0.1 2>&1); then
      say "SKIPPED: this engine cannot run a swarm: docker swarm init: $out"
      exit 0
    fi
    made_swarm=1
    say "made this engine a one-node swarm on 127.0.0.1 (left at the end)" ;;
  active)
    [ "$(docker info --format '{{.Swarm.ControlAvailable}}')" = true ] ||
      { say "SKIPPED: this engine is a worker of another swarm: a stack is deployed from a manager"; exit 0; }
    say "using the swarm this engine is a manager of" ;;
  *) say "SKIPPED: this engine's swarm is $state"; exit 0 ;;
esac
node=$(docker info --format '{{.Swarm.NodeID}}')
# Every store on this one node: the labels it lacks are set, and removed at
# the end (a node already labelled locklab.storeN=true is left as it is).
for n in 1 2 3; do
  key=locklab.store$n
  [ "$(docker node inspect -f "{{index .Spec.Labels \"$key\"}}" "$node")" = true ] || labels+=("$key")
done
for key in "${labels[@]}"; do docker node update --label-add "$key=true" "$node" >/dev/null; done
bash deploy/offline/build-images.sh

random | docker secret create "$REDIS_PASSWORD_SECRET" - >/dev/null || fail "docker secret create $REDIS_PASSWORD_SECRET"
say "docker stack deploy -c deploy/stack.yml $PROJECT (nginx on port $PORT, host mode)"
docker stack deploy -c deploy/stack.yml "$PROJECT" 2>&1 | sed 's/^/  /' >&2 || fail "stack deploy returned $?"

# Swarm has no depends_on: services start in any order and the stack is
# ready once a sale can go through nginx to both replicas and the lab
# answers its page (bounded; seen: the lab still preparing when both
# replicas were up).
for _ in $(seq 180); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/readyz")" = 200 ] && [ "$(names 20 | wc -l)" -eq 2 ] &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/")" = 200 ] && break
  sleep 1
done
replicas=$(names 40)
say "40 requests through nginx: $(echo "$replicas" | tr -s ' \n' ' ')"
[ "$(echo "$replicas" | wc -l)" -eq 2 ] || fail "nginx did not spread requests over the two replicas within 3 minutes of the deploy"
# The stack's network is encrypted, and Redis asks for the secret's password.
[ "$(docker network inspect -f '{{index .Options "encrypted"}}' "${PROJECT}_default")" = true ] ||
  fail "network ${PROJECT}_default is not encrypted: $(docker network inspect -f '{{json .Options}}' "${PROJECT}_default")"
redis1=$(docker ps -q --filter "label=com.docker.swarm.service.name=${PROJECT}_redis1" | head -1)
got=$(docker exec "$redis1" redis-cli ping 2>&1 || true)
[[ "$got" == *NOAUTH* ]] || fail "redis1 asked without the password: $got, want NOAUTH"
say "network ${PROJECT}_default encrypted; redis1 without the password: $got"
page=$(curl -sS "$base/")
echo "$page" | grep -q '<title>locklab' || fail "GET / is not the lab's page: $(echo "$page" | head -c 300)"
say "GET /: the lab's page"

# loadtest ARGS...: the bundled load test in a container on the stack's
# network, against nginx, the token through its environment.
loadtest() {
  docker run --rm --network "${PROJECT}_default" -e INVENTORY_ADMIN_TOKEN="$ADMIN_TOKEN" \
    locklab/loadtest:offline -url http://nginx/sale "$@"
}

# redlock polls, unfairly: at 25 at once, as deploy/compose-e2e.sh says why.
LOAD="-n 1000 -c 50"
POLL="-n 1000 -c 25"
say "load test on the stack's network: v1, v2, v6 ($LOAD), redlock ($POLL)"
out=$(loadtest $LOAD -lock v1,v2,v6 -json)
expect "$out" v1 zero
expect "$out" v2 positive
expect "$out" v6 zero
out=$(loadtest $POLL -lock redlock -json)
expect "$out" redlock zero

nginx_task=$(docker ps -q --filter "label=com.docker.swarm.service.name=${PROJECT}_nginx")
nginx_started=$(docker inspect -f '{{.State.StartedAt}}' "$nginx_task")
say "docker service scale ${PROJECT}_inventory=4: nginx follows, not restarted"
docker service scale "${PROJECT}_inventory=4" >/dev/null 2>&1 || fail "docker service scale returned $?"
for _ in $(seq 60); do [ "$(names 40 | wc -l)" -eq 4 ] && break; sleep 1; done
replicas=$(names 80)
say "80 requests through nginx: $(echo "$replicas" | tr -s ' \n' ' ')"
[ "$(echo "$replicas" | wc -l)" -eq 4 ] || fail "nginx did not spread requests over four replicas"
[ "$(docker inspect -f '{{.State.StartedAt}}' "$nginx_task")" = "$nginx_started" ] || fail "nginx was restarted by the scale"
out=$(loadtest $LOAD -lock v1,v2,v6 -json)
expect "$out" v1 zero
expect "$out" v2 positive
expect "$out" v6 zero
[ "$(served "$out" v6)" -eq 4 ] || fail "v6's sales were served by $(served "$out" v6) replicas, want 4: $out"
out=$(loadtest $POLL -lock redlock -json)
expect "$out" redlock zero
[ "$(served "$out" redlock)" -eq 4 ] || fail "redlock's sales were served by $(served "$out" redlock) replicas, want 4"
say "  four replicas served the sales, every one's history checked"

# A rolling update (every replica replaced, one at a time, the new one
# started first) while v6 sells 4000 units at 100 a second: no sale lost,
# none unknown, none refused, judged by the replies and the stock (a
# replaced replica's history goes with its container). The update starts once the load has sold
# (the stock moved) and must end before the load does.
say "rolling update of ${PROJECT}_inventory under load (v6, 4000 sales at 100/s)"
tmp=$(mktemp)
loadtest -rate 100 -n 4000 -c 50 -stock 4000 -lock v6 -json >"$tmp" 2>&1 &
load=$!
stock() { curl -sS "$base/stock" | grep -o '"stock":[0-9]*' | cut -d: -f2; }
for _ in $(seq 100); do s=$(stock) || s=""; [ -n "$s" ] && [ "$s" -gt 0 ] && [ "$s" -lt 4000 ] && break; sleep 0.1; done
docker service update --force --detach=false "${PROJECT}_inventory" >/dev/null 2>&1 || { wait $load || true; rm -f "$tmp"; fail "docker service update returned non-zero"; }
kill -0 $load 2>/dev/null || { rm -f "$tmp"; fail "the load ended before the rolling update did: it proves nothing"; }
say "  the update ended with the stock at $(stock), the load still running"
wait $load || { cat "$tmp" >&2; rm -f "$tmp"; fail "the load test during the rolling update failed"; }
out=$(cat "$tmp"); rm -f "$tmp"
expect_no_loss "$out" v6 4000
[ "$(served "$out" v6)" -gt 4 ] || fail "v6's sales were served by $(served "$out" v6) replicas: the update replaced none during the load"
say "  every sale during the update answered sold, by $(served "$out" v6) replicas, old and new (the old ones' histories went with them)"
say "PASS"

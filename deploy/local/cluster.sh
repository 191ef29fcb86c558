#!/usr/bin/env bash
# The local cluster: the tutorial's deployment on one machine, without Docker.
#
#   cluster.sh up      three redis-server nodes (127.0.0.1:6381-6383, no persistence,
#                      no replication), REPLICAS inventory replicas (:8080, :8081, ...)
#                      with -lock-override, and nginx on PORT balancing them round-robin
#   cluster.sh down    stops exactly what `up` started
#   cluster.sh status  what is running
#   cluster.sh start-redis PORT
#                      starts one Redis node again as `up` did (the scenarios
#                      kill one and bring it back)
#
# Settings (environment): LOCK (v1), PORT (80), REPLICAS (2), RUN_DIR (.run),
# WORK (1ms: the replicas' -work, business time between reading and writing
# the stock; it keeps the read-modify-write window open long enough that v1's
# and v2's oversell shows in every run, not just in most), PPROF (empty; 1:
# each replica serves Go's profiler on 127.0.0.1:6060, :6061, ...).
# Every process's log and pid file is in RUN_DIR. The replicas also read any
# INVENTORY_* variable (INVENTORY_WORK=1ms, ...), as the service does.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
LOCK=${LOCK:-v1}
PORT=${PORT:-80}
REPLICAS=${REPLICAS:-2}
WORK=${WORK:-1ms}
RUN_DIR=${RUN_DIR:-$root/.run}
REDIS_PORTS=(6381 6382 6383)
STOCK=${STOCK:-100}

say() { printf 'cluster: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

replica_port() { echo $((8080 + $1 - 1)); }

# pidfiles lists the pid files that `up` left in RUN_DIR, in stop order
# (nginx, then the replicas, which finish their sales, then Redis). They, not
# the current settings, say what is running: `REPLICAS=3 make up` then `make
# down` stops three replicas.
pidfiles() {
  local f
  for f in "$RUN_DIR/nginx.pid" "$RUN_DIR"/inventory-*.pid "$RUN_DIR"/redis-*.pid; do
    [ -e "$f" ] || [ -L "$f" ] && echo "$f"
  done
  return 0
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_until runs a command until it succeeds, for at most $1 seconds.
wait_until() {
  local limit=$1; shift 2 # $2 names what is awaited, for the reader
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

ensure_tools() {
  local missing=() pkgs=()
  command -v redis-server >/dev/null || { missing+=(redis-server); pkgs+=(redis-server); }
  command -v redis-cli >/dev/null || { missing+=(redis-cli); pkgs+=(redis-tools); }
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { missing+=(nginx); pkgs+=(nginx-light); }
  command -v curl >/dev/null || { missing+=(curl); pkgs+=(curl); }
  command -v go >/dev/null || die "go is not installed: see https://go.dev/doc/install"
  [ ${#missing[@]} -eq 0 ] && return
  if [ -f /etc/debian_version ] && command -v apt-get >/dev/null; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    say "${missing[*]} not found: installing ${pkgs[*]} with apt-get"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    # On a systemd host the package also starts the system nginx on port 80,
    # where the cluster's own nginx is to listen. It was installed just now,
    # for this, so stop it rather than fail on a taken port.
    if [[ " ${pkgs[*]} " == *" nginx-light "* ]] && command -v systemctl >/dev/null &&
      systemctl is-active --quiet nginx 2>/dev/null; then
      say "stopping and disabling the system nginx service the package started (the cluster runs its own nginx)"
      $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
    fi
  else
    case "$(uname -s)" in
      Darwin) die "missing: ${missing[*]}. Install them: brew install redis nginx curl" ;;
      *) die "missing: ${missing[*]}. Install them with your package manager, e.g. dnf install redis nginx curl" ;;
    esac
  fi
}

nginx_bin() { command -v nginx || echo /usr/sbin/nginx; }

# render_nginx writes the local nginx.conf: deploy/nginx.conf with its
# replicas block pointing at 127.0.0.1, listening on PORT, and with every path
# (pid, logs, temp files) inside RUN_DIR.
render_nginx() {
  local servers="" i
  for ((i = 1; i <= REPLICAS; i++)); do
    servers+="        server 127.0.0.1:$(replica_port "$i");\n"
  done
  awk -v servers="$servers" -v port="$PORT" -v run="$RUN_DIR/nginx" '
    NR == 1 { print "pid " run "/nginx.pid;\nerror_log " run "/error.log warn;" }
    /# replicas:begin/ { print; printf "%s", servers; skip = 1; next }
    /# replicas:end/ { skip = 0 }
    skip { next }
    /^http \{/ { print; print "    client_body_temp_path " run "/tmp/body;\n    proxy_temp_path " run "/tmp/proxy;\n    fastcgi_temp_path " run "/tmp/fastcgi;\n    uwsgi_temp_path " run "/tmp/uwsgi;\n    scgi_temp_path " run "/tmp/scgi;"; next }
    /^[[:space:]]*listen 80;/ { sub(/listen 80;/, "listen 127.0.0.1:" port ";") }
    { print }
  ' "$root/deploy/nginx.conf" > "$RUN_DIR/nginx/nginx.conf"
  grep -q "listen 127.0.0.1:$PORT;" "$RUN_DIR/nginx/nginx.conf" || die "could not render nginx.conf (no 'listen 80;' in deploy/nginx.conf)"
}

# start_redis starts one node (no persistence, no replication) and waits for PING.
start_redis() {
  local p=$1
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$RUN_DIR/redis-$p.pid" --logfile "$RUN_DIR/redis-$p.log" --dir "$RUN_DIR" \
    ${INVENTORY_REDIS_PASSWORD:+--requirepass "$INVENTORY_REDIS_PASSWORD"}
  wait_until 10 "redis $p" redis-cli -p "$p" ${INVENTORY_REDIS_PASSWORD:+-a "$INVENTORY_REDIS_PASSWORD" --no-auth-warning} ping \
    || { tail -5 "$RUN_DIR/redis-$p.log" >&2; die "redis-server $p did not start"; }
}

up() {
  local f i p
  if [ -d "$RUN_DIR" ]; then
    local running=0 total=0
    while read -r f; do
      total=$((total + 1))
      if alive "$f"; then running=$((running + 1)); fi
    done < <(pidfiles)
    if [ $total -gt 0 ] && [ $running -eq $total ]; then
      say "already up (run dir $RUN_DIR); 'make down' stops it"
      status
      return 0
    elif [ $running -gt 0 ]; then
      die "partly up ($running of $total processes running): run 'make down' first"
    fi
  fi
  [[ "$REPLICAS" =~ ^[1-9][0-9]*$ ]] || die "REPLICAS=$REPLICAS: want a whole number >= 1"
  if ! [[ "$PORT" =~ ^[0-9]+$ ]] || [ "$PORT" -lt 1 ] || [ "$PORT" -gt 65535 ]; then die "PORT=$PORT: want 1-65535"; fi
  ensure_tools

  for p in "${REDIS_PORTS[@]}"; do
    port_taken "$p" && die "port $p is already in use (needed for redis-server $p); free it and try again"
  done
  for ((i = 1; i <= REPLICAS; i++)); do
    p=$(replica_port "$i")
    port_taken "$p" && die "port $p is already in use (needed for replica inventory-$i); free it and try again"
  done
  port_taken "$PORT" && die "port $PORT is already in use (needed for nginx); free it or choose another: PORT=8000 make up"

  mkdir -p "$RUN_DIR/nginx/tmp" "$RUN_DIR/bin"
  # From here on, a failure stops whatever was started.
  trap 'say "start failed: stopping what was started"; down >/dev/null 2>&1 || true' ERR

  say "building the service"
  (cd "$root" && go build -o "$RUN_DIR/bin/inventory" ./cmd/inventory)

  for p in "${REDIS_PORTS[@]}"; do start_redis "$p"; done
  # Seed the stock once, as the tutorial does with redis-cli; a later `up` keeps it.
  redis-cli -p "${REDIS_PORTS[0]}" ${INVENTORY_REDIS_PASSWORD:+-a "$INVENTORY_REDIS_PASSWORD" --no-auth-warning} \
    set inventory:001 "$STOCK" nx >/dev/null

  local redlock procs
  redlock=$(printf '127.0.0.1:%s,' "${REDIS_PORTS[@]}")
  # Each replica gets its share of the cores, as a container's CPU limit would
  # give it (Go sizes GOMAXPROCS from that limit): two Go runtimes each
  # scheduling on every core of a 2-core machine spend it spinning against
  # each other (measured: ~1.2x the locked sales/s with the share). GOMAXPROCS
  # in the environment wins.
  procs=${GOMAXPROCS:-$(($(nproc) / REPLICAS))}
  [ "$procs" -ge 1 ] || procs=1
  for ((i = 1; i <= REPLICAS; i++)); do
    p=$(replica_port "$i")
    GOMAXPROCS=$procs setsid "$RUN_DIR/bin/inventory" -port "$p" -name "inventory-$i" -lock "$LOCK" -lock-override -work "$WORK" \
      -redis "127.0.0.1:${REDIS_PORTS[0]}" -redlock "${redlock%,}" ${PPROF:+-pprof "127.0.0.1:$((6060 + i - 1))"} \
      </dev/null >"$RUN_DIR/inventory-$i.log" 2>&1 &
    echo $! >"$RUN_DIR/inventory-$i.pid"
    echo "127.0.0.1:$p" >"$RUN_DIR/inventory-$i.addr" # for the bench, which reads each replica's /metrics
  done
  for ((i = 1; i <= REPLICAS; i++)); do
    p=$(replica_port "$i")
    wait_until 15 "replica $i" curl -fsS "http://127.0.0.1:$p/readyz" \
      || { tail -5 "$RUN_DIR/inventory-$i.log" >&2; die "replica inventory-$i (:$p) did not become ready; log: $RUN_DIR/inventory-$i.log"; }
  done

  render_nginx
  "$(nginx_bin)" -t -q -p "$RUN_DIR/nginx" -c "$RUN_DIR/nginx/nginx.conf" -e "$RUN_DIR/nginx/error.log"
  "$(nginx_bin)" -p "$RUN_DIR/nginx" -c "$RUN_DIR/nginx/nginx.conf" -e "$RUN_DIR/nginx/error.log"
  wait_until 10 "nginx" test -s "$RUN_DIR/nginx/nginx.pid" || die "nginx did not start; log: $RUN_DIR/nginx/error.log"
  ln -sf "$RUN_DIR/nginx/nginx.pid" "$RUN_DIR/nginx.pid"
  wait_until 10 "nginx" curl -fsS "http://127.0.0.1:$PORT/healthz" \
    || die "nginx on port $PORT does not reach the replicas; log: $RUN_DIR/nginx/error.log"
  trap - ERR

  local url="http://localhost"
  [ "$PORT" = 80 ] || url="http://localhost:$PORT"
  say "up: nginx $url -> $REPLICAS replicas (:8080...) with -lock $LOCK -work $WORK, GOMAXPROCS $procs; redis 6381-6383; logs and pids in $RUN_DIR"
  say "try: curl -X POST $url/sale    |    go run ./loadtest -url $url/sale -lock all    |    make down"
}

down() {
  [ -d "$RUN_DIR" ] || { say "nothing to stop"; return 0; }
  local f pid stopped=0
  for f in $(pidfiles); do
    alive "$f" || { rm -f "$f" "${f%.pid}.addr"; continue; }
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    wait_until 20 "pid $pid" bash -c "! kill -0 $pid" || { say "pid $pid ($f) ignored SIGTERM: killing it"; kill -KILL "$pid" 2>/dev/null || true; }
    rm -f "$f" "${f%.pid}.addr"
    stopped=$((stopped + 1))
  done
  say "down: stopped $stopped processes (logs kept in $RUN_DIR)"
}

status() {
  [ -d "$RUN_DIR" ] || { say "not up"; return 0; }
  local f n=0
  while read -r f; do
    n=$((n + 1))
    if alive "$f"; then echo "up    $(basename "$f" .pid) (pid $(cat "$f"))"; else echo "down  $(basename "$f" .pid)"; fi
  done < <(pidfiles)
  [ $n -gt 0 ] || say "not up"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  start-redis)
    [[ " ${REDIS_PORTS[*]} " == *" ${2:-} "* ]] || die "start-redis: want one of ${REDIS_PORTS[*]}"
    start_redis "$2" ;;
  *) echo "usage: $0 up|down|status|start-redis PORT   (env: LOCK=v1 PORT=80 REPLICAS=2 RUN_DIR=.run)" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Builds every image the Compose stack needs with no container registry: for
# air-gapped hosts, registries blocked by policy, CI machines that reach none.
#
#   locklab/base:offline       Debian bookworm (debootstrap --variant=minbase)
#                              with redis-server, redis-tools, etcd-server,
#                              etcd-client, nginx-light, curl, ZooKeeper
#                              (libzookeeper-java, a headless JRE) and
#                              mariadb-server-core, mariadb-client-core
#   locklab/redis:offline      the base, running redis-server as user redis
#   locklab/etcd:offline       the base, running etcd as user etcd
#   locklab/nginx:offline      the base, running nginx in the foreground
#   locklab/zookeeper:offline  the base, as user 65532 (deploy/zookeeper.sh)
#   locklab/mariadb:offline    the base, as user 65532 (deploy/mariadb.sh)
#   locklab/inventory:offline  FROM scratch + the static service binary
#   locklab/lab:offline        FROM scratch + the static lab binary
#   locklab/loadtest:offline   FROM scratch + the static load test binary
#
# Needs: docker, debootstrap (apt-get installs it on Debian/Ubuntu), go, and a
# Debian mirror (MIRROR, default http://deb.debian.org/debian). The base image
# is built once and reused; REBUILD_BASE=1 makes it again.
# Then: docker compose -f docker-compose.yml -f deploy/offline/docker-compose.offline.yml up -d
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/deploy/offline"
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SUITE=${SUITE:-bookworm}
PACKAGES=redis-server,redis-tools,etcd-server,etcd-client,nginx-light,curl,libzookeeper-java,default-jre-headless,mariadb-server-core,mariadb-client-core
say() { printf 'offline: %s\n' "$*" >&2; }

command -v docker >/dev/null || { say "docker is not installed"; exit 1; }
docker info >/dev/null 2>&1 || { say "the Docker engine does not answer (docker info failed)"; exit 1; }

# A base made before etcd, ZooKeeper or MariaDB joined the stack lacks them:
# made again.
has_base() {
  docker image inspect locklab/base:offline >/dev/null 2>&1 &&
    docker run --rm --entrypoint /usr/bin/test locklab/base:offline -x /usr/bin/etcd -a -x /usr/bin/java \
      -a -f /usr/share/java/zookeeper.jar -a -x /usr/sbin/mariadbd -a -x /usr/bin/my_print_defaults
}
if [ "${REBUILD_BASE:-0}" = 1 ] || ! has_base; then
  if ! command -v debootstrap >/dev/null; then
    if [ -f /etc/debian_version ]; then
      sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
      say "installing debootstrap with apt-get"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq debootstrap >/dev/null
    else
      say "debootstrap is missing: it comes with Debian and Ubuntu (apt-get install debootstrap)"; exit 1
    fi
  fi
  [ "$(id -u)" -eq 0 ] || { say "debootstrap needs root: run this script with sudo"; exit 1; }
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  say "debootstrap $SUITE with $PACKAGES (the longest step: the whole build took about 3.5 minutes on a 2-core machine)"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 ||
    { tail -20 "$rootfs.log" >&2; say "debootstrap failed; log: $rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  # Trim what a container never reads.
  rm -rf "$rootfs"/usr/share/{doc,man,info,locale} "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log
  say "importing locklab/base:offline"
  tar -C "$rootfs" -c . | docker import - locklab/base:offline >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
else
  say "reusing locklab/base:offline (REBUILD_BASE=1 to make it again)"
fi

say "building the static binaries with $(go version | cut -d' ' -f3)"
mkdir -p "$here/bin"
(cd "$root" &&
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$here/bin/inventory" ./cmd/inventory &&
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$here/bin/lab" ./cmd/lab &&
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$here/bin/loadtest" ./loadtest)

for target in redis etcd nginx zookeeper mariadb inventory lab loadtest; do
  say "building locklab/$target:offline"
  docker build -q --target "$target" -t "locklab/$target:offline" -f "$here/Dockerfile" "$here" >"$here/bin/build.log" 2>&1 ||
    { cat "$here/bin/build.log" >&2; say "docker build of locklab/$target:offline failed"; exit 1; }
done
docker images --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep '^locklab/.*:offline' >&2

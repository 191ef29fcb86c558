#!/usr/bin/env sh
# deploy/compose.sh ARGS...: Docker Compose, whichever this machine has.
# It runs `docker compose ARGS` where the Compose v2 plugin is installed, and
# Debian's `docker-compose ARGS` (Compose v1) where it is not: the README's
# Docker commands work with either through it. Without the plugin, `docker
# compose up -d` fails ("unknown shorthand flag: 'd'") and `docker compose
# down -v` prints Docker's version and stops nothing.
# LOCKLAB_COMPOSE names the tool to use instead ("docker-compose" forces v1).
set -eu
if [ -n "${LOCKLAB_COMPOSE:-}" ]; then
  # shellcheck disable=SC2086
  exec $LOCKLAB_COMPOSE "$@"
fi
if docker compose version >/dev/null 2>&1; then
  exec docker compose "$@"
fi
if command -v docker-compose >/dev/null 2>&1; then
  exec docker-compose "$@"
fi
echo "deploy/compose.sh: no Docker Compose here: neither the docker compose plugin (v2) nor docker-compose (v1)." >&2
echo "Install one: bash deploy/install-compose-v2.sh (builds the v2 plugin with Go), or apt-get install docker-compose (v1)." >&2
exit 1

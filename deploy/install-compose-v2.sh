#!/usr/bin/env bash
# Installs Docker Compose v2 (`docker compose`) as a CLI plugin, built from
# source through the Go module proxy: for hosts that have only Debian's v1
# `docker-compose` and no way to download release binaries. This is how the
# stack was tested with v2 (see the README). Takes a few minutes.
#   VERSION=v2.40.3 bash deploy/install-compose-v2.sh
set -euo pipefail
VERSION=${VERSION:-v2.40.3}
dir=$(go mod download -json "github.com/docker/compose/v2@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "could not download github.com/docker/compose/v2@$VERSION" >&2; exit 1; }
out="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
mkdir -p "$out"
# Built inside the downloaded module, so its go.mod's replace directives hold
# (go install of it refuses them).
(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
  -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$VERSION" \
  -o "$out/docker-compose" ./cmd)
docker compose version

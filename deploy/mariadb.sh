#!/usr/bin/env bash
# The Compose stack's MariaDB (the db locks'): a fresh data directory in the
# container (gone with `down`), the replicas' "locklab" account with
# DB_PASSWORD (the Redis password, as the local cluster does) made at start
# through a private init file, never a command line; small (a lock table needs
# no big buffer pool). Debian's packages: mariadbd and mariadb-install-db.
set -euo pipefail
: "${DB_PASSWORD:?DB_PASSWORD: the password of the replicas account}"
umask 077
data=/tmp/mariadb
# SQL's string literal: a backslash and a quote doubled.
pw=$(printf '%s' "$DB_PASSWORD" | sed -e 's/\\/\\\\/g' -e "s/'/''/g")
cat >/tmp/init.sql <<SQL
CREATE DATABASE IF NOT EXISTS locklab;
CREATE USER IF NOT EXISTS 'locklab'@'%' IDENTIFIED BY '$pw';
GRANT ALL ON locklab.* TO 'locklab'@'%';
SQL
mariadb-install-db --no-defaults --datadir="$data" --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve >/tmp/install.log 2>&1 ||
  { cat /tmp/install.log >&2; exit 1; }
exec mariadbd --no-defaults --datadir="$data" --socket=/tmp/mariadb.sock --pid-file=/tmp/mariadb.pid \
  --port=3306 --bind-address=0.0.0.0 --skip-name-resolve --innodb-buffer-pool-size=16M --init-file=/tmp/init.sql

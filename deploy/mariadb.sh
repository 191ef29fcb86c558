#!/usr/bin/env bash
# The Compose stack's MariaDB (the db locks'): a fresh data directory in the
# container (gone with `down`), the replicas' "locklab" account with
# DB_PASSWORD, or the password in the file DB_PASSWORD_FILE (the Redis
# password, as the local cluster does), made at start through a private init
# file, never a command line; small (a lock table needs no big buffer pool),
# but with 500 connections, as the local cluster's (dblock.MaxConnections):
# db-getlock holds one for each holder and waiter, 100 at once under the
# default load, beside the polling locks' idle ones (151, MariaDB's default,
# is too few for both).
# Debian's packages: mariadbd and mariadb-install-db.
#
# The healthcheck's own account, "healthcheck"@localhost, may do nothing but
# log in, with a random password in /tmp/healthcheck.cnf (this container's
# user's only): the probe logs in over the socket and says goodbye, which
# MariaDB does not log, where a connection closed before logging in is an
# "Aborted connection" line each time.
set -euo pipefail
if [ -z "${DB_PASSWORD:-}" ] && [ -n "${DB_PASSWORD_FILE:-}" ]; then
  DB_PASSWORD=$(cat "$DB_PASSWORD_FILE")
fi
: "${DB_PASSWORD:?DB_PASSWORD or DB_PASSWORD_FILE: the password of the replicas account}"
umask 077
data=/tmp/mariadb
sock=/tmp/mariadb.sock
# SQL's string literal: a backslash and a quote doubled.
pw=$(printf '%s' "$DB_PASSWORD" | sed -e 's/\\/\\\\/g' -e "s/'/''/g")
probe=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat >/tmp/init.sql <<SQL
CREATE DATABASE IF NOT EXISTS locklab;
CREATE USER IF NOT EXISTS 'locklab'@'%' IDENTIFIED BY '$pw';
GRANT ALL ON locklab.* TO 'locklab'@'%';
CREATE USER IF NOT EXISTS 'healthcheck'@'localhost' IDENTIFIED BY '$probe';
SQL
printf '[client]\nuser=healthcheck\npassword=%s\nsocket=%s\n' "$probe" "$sock" >/tmp/healthcheck.cnf
mariadb-install-db --no-defaults --datadir="$data" --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve >/tmp/install.log 2>&1 ||
  { cat /tmp/install.log >&2; exit 1; }
exec mariadbd --no-defaults --datadir="$data" --socket="$sock" --pid-file=/tmp/mariadb.pid \
  --port=3306 --bind-address=0.0.0.0 --skip-name-resolve --innodb-buffer-pool-size=16M --max-connections=500 --init-file=/tmp/init.sql

#!/usr/bin/env bash
# One member of the Compose stack's ZooKeeper ensemble (the zk lock's): the
# local cluster's settings (internal/cluster/zookeeper.go: a 500 ms tick, so
# sessions of 1 s to 60 s; a small JVM), here on every interface of the
# container, its data in the container only (gone with `down`, as Redis' and
# etcd's). ZK_ID is the member's number, ZK_SERVERS the members' names in
# order. Debian's packages: java and /usr/share/java/zookeeper.jar.
set -euo pipefail
: "${ZK_ID:?ZK_ID: the number of this member, 1-3}" "${ZK_SERVERS:?ZK_SERVERS: the host names of the members, comma-separated}"
data=/tmp/zookeeper
mkdir -p "$data"
echo "$ZK_ID" >"$data/myid"
{
  printf '%s\n' tickTime=500 initLimit=20 syncLimit=10 "dataDir=$data" clientPort=2181 \
    minSessionTimeout=1000 maxSessionTimeout=60000 4lw.commands.whitelist=ruok,srvr,mntr \
    admin.enableServer=false autopurge.purgeInterval=0 quorumListenOnAllIPs=true
  i=0
  IFS=, read -ra servers <<<"$ZK_SERVERS"
  for s in "${servers[@]}"; do
    i=$((i + 1))
    echo "server.$i=$s:2888:3888"
  done
} >/tmp/zoo.cfg
exec java -Xms16m -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dzookeeper.admin.enableServer=false \
  -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
  org.apache.zookeeper.server.quorum.QuorumPeerMain /tmp/zoo.cfg

# What the Docker scripts share (sourced by deploy/compose-e2e.sh,
# deploy/swarm-e2e.sh and deploy/compose-scenarios.sh): each script defines
# say and fail, and base (http://127.0.0.1:PORT, nginx) before it calls these.

# port_taken PORT: something listens on 127.0.0.1:PORT.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# random: a new secret, 32 hex digits.
random() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# names HOW_MANY: the replicas' names in HOW_MANY replies through nginx, one
# a line with its count.
names() { for _ in $(seq "$1"); do curl -sS "$base/healthz" 2>/dev/null; echo; done | { grep -o '"replica":"[^"]*"' || true; } | sort | uniq -c; }

# field LINE NAME: a number from one line of loadtest -json.
field() { echo "$1" | grep -o "\"$2\":-\?[0-9]*" | head -1 | cut -d: -f2; }
# expect LINES LOCK zero|positive: check one version's line of loadtest
# -json: oversold with the checker's evidence (positive), or none of it and
# linearizable (zero); every request served either way.
expect() {
  local line over failed sold two lost unknown
  line=$(echo "$1" | grep "\"lock\":\"$2\"") || fail "no result for $2"
  over=$(field "$line" oversold); failed=$(field "$line" failed); sold=$(field "$line" sold)
  two=$(field "$line" two_holders); lost=$(field "$line" lost_updates); unknown=$(field "$line" unknown)
  echo "$line" | grep -q '"history_checked":true' || fail "$2: the replicas' history was not checked: $line"
  say "  $2: sold $sold, oversold $over, two holders $two, lost updates $lost, failed $failed, unknown $unknown; p99 $(echo "$line" | grep -o '"p99":[0-9]*' | cut -d: -f2) ms, $(echo "$line" | grep -o '"seconds":[0-9]*\.\?[0-9]\?' | cut -d: -f2) s"
  case "$3" in
    zero) [ "$over" -eq 0 ] && [ "$two" -eq 0 ] && [ "$lost" -eq 0 ] && echo "$line" | grep -q '"linearizable":true' \
      || fail "$2: oversold $over, two holders $two, lost updates $lost: want none, linearizable: $line" ;;
    positive) [ "$over" -gt 0 ] && [ $((two + lost)) -gt 0 ] || fail "$2 did not oversell with evidence: $line" ;;
  esac
  [ "$failed" -eq 0 ] && [ "$unknown" -eq 0 ] || fail "$2: $failed requests failed, $unknown unknown: $line"
}
# served LINES LOCK: how many replicas served LOCK's sales.
served() { echo "$1" | grep "\"lock\":\"$2\"" | grep -o '"replicas":{[^}]*}' | grep -o '":[0-9][0-9]*' | wc -l; }
# expect_no_loss LINES LOCK N: LOCK's line sold N, every request answered
# sold, none failed or unknown, none oversold, linearizable (the replies
# against the stock): for a run whose replicas were replaced meanwhile, whose
# histories went with their containers.
expect_no_loss() {
  local line
  line=$(echo "$1" | grep "\"lock\":\"$2\"") || fail "no result for $2"
  say "  $2: sold $(field "$line" sold) of $3, oversold $(field "$line" oversold), failed $(field "$line" failed), unknown $(field "$line" unknown)"
  [ "$(field "$line" sold)" -eq "$3" ] && [ "$(field "$line" oversold)" -eq 0 ] && [ "$(field "$line" failed)" -eq 0 ] &&
    [ "$(field "$line" unknown)" -eq 0 ] && echo "$line" | grep -q '"linearizable":true' ||
    fail "$2: a sale lost, refused or unknown: $line"
}

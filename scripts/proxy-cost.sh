#!/usr/bin/env bash
# The cost of the proxy pair on loopback (docs/proxy.md "Cost"): redis-benchmark straight to
# redis-server, then through `repflow proxy client` + `repflow proxy server` with 1 and 2
# copies. Latency at one connection (-c 1: the idle path) and throughput at 50 connections
# (-c 50), plus the CPU seconds each sidecar used (requests per CPU-second = per core).
#
#   scripts/proxy-cost.sh [N_LATENCY] [N_THROUGHPUT]      (defaults 20000 and 100000)
#
# With socat installed it also measures the floor any pair of relays pays on this machine: two
# chained socat relays (client side, server side) in front of redis-server, the same hops as
# the sidecars without their work. And one copy with the journal off (--no-journal), to show
# the journal's share.
#
# Needs redis-server and redis-tools, and the repflow package installed. Prints CSV lines:
# setup,clients,test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms, then the CPU lines.
set -euo pipefail
N_LAT=${1:-20000}
N_TPUT=${2:-100000}
PY=${PYTHON:-python3}
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
RP=16379; SP=17000; CP=16380
redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" >/dev/null &
PIDS+=($!)
sleep 0.5
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime + stime, clock ticks
TCK=$(getconf CLK_TCK)
bench() { # setup clients n port
  redis-benchmark -p "$4" -t get,set,incr -n "$3" -c "$2" --csv --precision 3 | tail -n +2 |
    tr -d '"' | sed "s/^/$1,$2,/"
}
echo "setup,clients,test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
bench direct 1 "$N_LAT" $RP
bench direct 50 "$N_TPUT" $RP
if command -v socat >/dev/null 2>&1; then
  socat TCP-LISTEN:$((SP + 10)),bind=127.0.0.1,reuseaddr,fork,nodelay TCP:127.0.0.1:$RP,nodelay &
  PIDS+=($!)
  socat TCP-LISTEN:$((CP + 10)),bind=127.0.0.1,reuseaddr,fork,nodelay \
    TCP:127.0.0.1:$((SP + 10)),nodelay &
  PIDS+=($!)
  for _ in $(seq 200); do [ "$(redis-cli -p $((CP + 10)) PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  bench relay-2x-socat 1 "$N_LAT" $((CP + 10))
  bench relay-2x-socat 50 "$N_TPUT" $((CP + 10))
fi
for copies in 1 2 nojournal; do
  journal=(--journal "$TMP/journal-$copies")
  if [ "$copies" = nojournal ]; then journal=(--no-journal); fi
  $PY -m repflow proxy server --listen 127.0.0.1:$SP --ports 2 --upstream 127.0.0.1:$RP \
    --protocol redis "${journal[@]}" >/dev/null &
  S=$!; PIDS+=($S)
  $PY -m repflow proxy client --listen 127.0.0.1:$CP --to 127.0.0.1:$SP --protocol redis \
    --copies "${copies/nojournal/1}" >/dev/null &
  C=$!; PIDS+=($C)
  for _ in $(seq 200); do [ "$(redis-cli -p $CP PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  bench "proxy-$copies" 1 "$N_LAT" $CP
  if [ "$copies" = nojournal ]; then kill $C $S; wait $C $S 2>/dev/null || true; continue; fi
  c0=$(cpu $C); s0=$(cpu $S); t0=$(date +%s.%N)
  bench "proxy-$copies" 50 "$N_TPUT" $CP
  c1=$(cpu $C); s1=$(cpu $S); t1=$(date +%s.%N)
  awk -v c=$((c1 - c0)) -v s=$((s1 - s0)) -v tck="$TCK" -v n=$((3 * N_TPUT)) -v w="$(echo "$t1 - $t0" | bc)" -v k=$copies \
    'BEGIN { printf "# proxy-%d -c 50: %d requests in %.2f s wall; client sidecar %.2f CPU-s (%.0f req per CPU-s), server sidecar %.2f CPU-s (%.0f req per CPU-s)\n", k, n, w, c/tck, n/(c/tck), s/tck, n/(s/tck) }'
  kill $C $S; wait $C $S 2>/dev/null || true
  sleep 0.3
done
echo "# load: $(uptime)"

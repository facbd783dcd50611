#!/usr/bin/env bash
# Issue 47's attack 2 on loopback (docs/performance.md, "The proxy under attack 2"): four
# clients pipeline GET of a 50 KB value through `repflow proxy client` (2 copies) and
# `repflow proxy server` (journal on) to redis-server, reading every reply, for LOAD seconds;
# the server sidecar's RSS is sampled every 0.5 s before, during and for AFTER seconds after.
#
#   scripts/proxy-attack2.sh [LOAD] [AFTER] [PIPELINE]      (defaults 15, 10 and 64)
#
# Needs redis-server and redis-tools (redis-benchmark), and the repflow package installed.
# Prints one line per sample (phase,t_s,rss_mib), then the server sidecar's counters line
# (its requests over LOAD seconds are the GET rate).
set -euo pipefail
LOAD=${1:-15}
AFTER=${2:-10}
PIPE=${3:-64}
PY=${PYTHON:-python3}
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
RP=16479; SP=17100; CP=16480
redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" >/dev/null &
PIDS+=($!)
$PY -m repflow proxy server --listen 127.0.0.1:$SP --ports 2 --upstream 127.0.0.1:$RP \
  --protocol redis --journal "$TMP/journal" >"$TMP/server.out" 2>&1 &
S=$!; PIDS+=($S)
$PY -m repflow proxy client --listen 127.0.0.1:$CP --to 127.0.0.1:$SP --protocol redis \
  --copies 2 >/dev/null 2>&1 &
C=$!; PIDS+=($C)
for _ in $(seq 200); do [ "$(redis-cli -p $CP PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
head -c 50000 /dev/zero | tr '\0' v | redis-cli -p $CP -x SET k50 >/dev/null
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$S/status"; }
T0=$(date +%s.%N)
sample() { # phase seconds
  local end; end=$(echo "$(date +%s.%N) + $2" | bc)
  while [ "$(echo "$(date +%s.%N) < $end" | bc)" = 1 ]; do
    echo "$1,$(echo "$(date +%s.%N) - $T0" | bc | xargs printf %.1f),$(rss)"
    sleep 0.5
  done
}
echo "phase,t_s,rss_mib"
sample before 3
sample during "$LOAD" &
SAMPLER=$!
# Four clients, each pipelining PIPE GETs and reading every reply, until killed.
timeout "$LOAD" redis-benchmark -p $CP -c 4 -P "$PIPE" -n 100000000 GET k50 \
  >"$TMP/bench.out" 2>&1 || true
wait $SAMPLER
sample after "$AFTER"
kill -TERM $S
wait $S 2>/dev/null || true
echo "server sidecar: $(tail -n 1 "$TMP/server.out")"

#!/usr/bin/env bash
# bench/ab/resp-op.sh -- one redis-benchmark point for A/B runs: starts a
# server alone on port 26990, runs `redis-benchmark -t TEST -d 1024 -r 100000
# -n N -c CONC` (GETs after a 200 k-set preload), and prints requests/s with
# the server's CPU time (utime + stime from /proc) and context switches per
# request (and, for nvdepot, requests per device flush). BIN: redis (no persistence), redis-always (appendfsync always) or
# a path to an nvdepot binary (serve --cache-mb 1024; extra args follow).
#   bash bench/ab/resp-op.sh BIN get|set CONC N [serve args...]
BIN=$1; T=$2; C=$3; N=$4; shift 4
D=${TMPDIR:-/tmp}/resp-op-$$; rm -rf $D; mkdir -p $D
PORT=26990
case $BIN in
  redis) redis-server --port $PORT --bind 127.0.0.1 --appendonly no --save '' --dir $D >${TMPDIR:-/tmp}/resp-op-$$.log 2>&1 & ;;
  redis-always) redis-server --port $PORT --bind 127.0.0.1 --appendonly yes --appendfsync always --save '' --dir $D >${TMPDIR:-/tmp}/resp-op-$$.log 2>&1 & ;;
  *) $BIN serve --port $PORT --bind 127.0.0.1 --data $D --size 2G --cache-mb 1024 "$@" >${TMPDIR:-/tmp}/resp-op-$$.log 2>&1 & ;;
esac
PID=$!
for i in $(seq 50); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
[ $T = get ] && redis-benchmark -p $PORT -t set -d 1024 -r 100000 -n 200000 -c 16 -q >/dev/null
read u0 s0 < <(awk '{print $14, $15}' /proc/$PID/stat)
cs0=$(grep -h ctxt_switches /proc/$PID/task/*/status | awk '{s+=$2} END{print s}')
flushes() { redis-cli -p $PORT info nvdepot 2>/dev/null | tr -d '\r' | awk -F: '$1=="nvdepot_flushes"{print $2}'; }
f0=$(flushes)
out=$(redis-benchmark -p $PORT -t $T -d 1024 -r 100000 -n $N -c $C -q | tr '\r' '\n' | grep -a ': ' | tail -1)
read u1 s1 < <(awk '{print $14, $15}' /proc/$PID/stat)
cs1=$(grep -h ctxt_switches /proc/$PID/task/*/status | awk '{s+=$2} END{print s}')
f1=$(flushes)
kill $PID; wait $PID 2>/dev/null; rm -rf $D
rps=$(echo "$out" | awk '{print $2}')
awk -v r=$rps -v u=$((u1-u0)) -v s=$((s1-s0)) -v n=$N -v cs=$((cs1-cs0)) -v t=$T -v c=$C -v f=$(( ${f1:-0} - ${f0:-0} )) -v b="$(basename $BIN) $*" 'BEGIN{printf "%-28s %s c=%-3s %9.0f/s  cpu_us/req %.2f ctxsw/req %.2f req/flush %s\n", b, t, c, r, (u+s)*10000/n, cs/n, (f && t == "set") ? sprintf("%.1f", n/f) : "-"}'

#!/usr/bin/env bash
# bench/ab/resp-big.sh -- the big scenario of bench/resp-vs-redis.sh for one
# nvdepot binary, with the numbers that explain it: nvdepot serve in a
# 256 MiB memory cgroup (--cache-mb 128), 1 Mi keys x 1 KiB preloaded, then
# `nvdepot bench resp` GETs at C connections (default 64) for 10 s. Prints
# the device's reads/s, mean read time and mean queue depth (from
# /sys/block/$DEV/stat, DEV default vda), GETs/s, and the server's and the
# load generator's CPU per GET. THREADS=N adds --threads N.
#   [C=16] [THREADS=1] bash bench/ab/resp-big.sh BIN
BIN=$1; H=$(cd "$(dirname "$0")/../../../shared/harness" && pwd); W=${TMPDIR:-/tmp}/resp-big-$$; PORT=26995
rm -rf $W; mkdir -p $W
rmdir /sys/fs/cgroup/memory/nvbench-abbig 2>/dev/null
$H/in_memcg.sh 256M abbig -- $BIN serve --port $PORT --data $W/nv --size 2304M --cache-mb 128 ${THREADS:+--threads $THREADS} 2>$W/srv.log &
for i in $(seq 600); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
PID=$(pgrep -f "serve --port $PORT" | tail -1)
$BIN bench resp --server 127.0.0.1:$PORT --keys 1048576 --value-size 1024 --connections 16 --preload --preload-pipeline 16 --requests 0 > $W/pre.out 2>&1
read u0 s0 < <(awk '{print $14, $15}' /proc/$PID/stat)
read -a d0 < /sys/block/${DEV:-vda}/stat; t0=$(date +%s%N)
# PERF=1: also record the server with perf for 8 s.
if [ -n "$PERF" ]; then perf record -g -p $PID -o ${TMPDIR:-/tmp}/resp-big.perf.data -- sleep 8 >/dev/null 2>&1 & fi
/usr/bin/time -f "client user %U sys %S" $BIN bench resp --server 127.0.0.1:$PORT --keys 1048576 --value-size 1024 --connections ${C:-64} ${CLIENT_THREADS:+--threads $CLIENT_THREADS} --ratio 1:0 --duration 10 --json $W/r.json > $W/run.out 2> $W/time.out
read u1 s1 < <(awk '{print $14, $15}' /proc/$PID/stat)
read -a d1 < /sys/block/${DEV:-vda}/stat; t1=$(date +%s%N)
awk -v r=$((d1[0]-d0[0])) -v rt=$((d1[3]-d0[3])) -v w=$((d1[10]-d0[10])) -v ms=$(( (t1-t0)/1000000 )) 'BEGIN{printf "device: reads/s %.0f avg read ms %.3f avg queue %.1f\n", r*1000/ms, rt/r, w/ms}' 
gets=$(python3 -c "import json;r=json.load(open('$W/r.json'))['run'];print(r['gets'], r['seconds'], r['hit_ratio'])")
set -- $gets
cu=$(grep client $W/time.out | awk '{print $3+$5}')
awk -v g=$1 -v t=$2 -v h=$3 -v u=$((u1-u0)) -v s=$((s1-s0)) -v cu=$cu 'BEGIN{printf "GET/s %.0f hit %.4f server cpu_us/get %.2f (user %.2f sys %.2f) client cpu_us/get %.2f\n", g/t, h, (u+s)*10000/g, u*10000/g, s*10000/g, cu*1e6/g}'
kill $PID; sleep 1; rm -rf $W

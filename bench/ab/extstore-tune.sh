#!/usr/bin/env bash
# bench/ab/extstore-tune.sh -- which memcached + extstore configuration an
# operator would pick for the memcache benchmark's big scenario on this
# machine. Each configuration runs alone in the big scenario's memory
# cgroup (shared/harness/in_memcg.sh, BUDGET_MB, default 1024), is preloaded
# with ITEMS (default 4 000 000) 1 KiB items exactly as
# bench/memcache-vs-memcached.sh preloads extstore (2 connections, no
# pipelining: a faster writer outruns the flusher), then measured with
# `nvdepot bench memcache` (uniform 9:1 over every key) at C connections
# (default 64), REPS times SECS seconds. One line per run:
#   config  rep  ops/s  GET hits/s  hit_ratio  curr_items
# and a last line naming the configuration with the most GET hits/s
# (its median run; the lower one of an even number).
#
#   CONFIGS="name:MEM_MB:WORKER_THREADS:EXT_OPTS ..." (EXT_OPTS: commas)
#   NVDEPOT=target/release/nvdepot bash bench/ab/extstore-tune.sh
set -u
source "$(dirname "$0")/lib.sh"
BIN=${NVDEPOT:-$ROOT/target/release/nvdepot}
W=${BENCH_DIR:-$ROOT/bench/work/extstore-tune}
BUDGET_MB=${BUDGET_MB:-1024} ITEMS=${ITEMS:-4000000} C=${C:-64}
REPS=${REPS:-2} SECS=${SECS:-10} PORT=${PORT:-22490}
ext_size=$(( ITEMS * 1100 / 1048576 * 2 ))M
CONFIGS=${CONFIGS:-"
io1:512:4:ext_item_age=0
io4:512:4:ext_item_age=0,ext_threads=4
io8:512:4:ext_item_age=0,ext_threads=8
io16:512:4:ext_item_age=0,ext_threads=16
io32:512:4:ext_item_age=0,ext_threads=32
io16-t2:512:2:ext_item_age=0,ext_threads=16
io16-m256:256:4:ext_item_age=0,ext_threads=16
io16-m768:768:4:ext_item_age=0,ext_threads=16
io16-wbuf16:512:4:ext_item_age=0,ext_threads=16,ext_wbuf_size=16
io16-age-stock:512:4:ext_threads=16
"}
mkdir -p "$W"
out=$W/results.tsv; : >"$out"
cgdir() { for d in /sys/fs/cgroup/memory/nvbench-$1 /sys/fs/cgroup/nvbench-$1; do [ -d "$d" ] && echo "$d"; done; }
for cfg in $CONFIGS; do
  IFS=: read -r name mem threads opts <<<"$cfg"
  rm -rf "$W/data"; rmdir "$(cgdir "et-$name")" 2>/dev/null
  pid=$(MEM_MB=$mem EXT_SIZE=$ext_size THREADS=$threads EXT_OPTS=$opts LOG=$W/$name.log \
    "$H/in_memcg.sh" "${BUDGET_MB}M" "et-$name" -- "$H/start_memcached_extstore.sh" "$PORT" "$W/data") ||
    { echo "$name: did not start"; continue; }
  timeout $(( ITEMS / 5000 + 60 )) "$BIN" bench memcache --server "127.0.0.1:$PORT" --keys "$ITEMS" \
    --value-size 1024 --preload --requests 0 --connections 2 --preload-pipeline 1 >"$W/$name-preload.out" 2>&1
  sleep 2
  items=$(memcache_stats "$PORT" curr_items)
  for rep in $(seq 1 "$REPS"); do
    kill -0 "$pid" 2>/dev/null || { echo "$name: server died"; break; }
    timeout $(( SECS + 120 )) "$BIN" bench memcache --server "127.0.0.1:$PORT" --keys "$ITEMS" \
      --value-size 1024 --connections "$C" --ratio 9:1 --distribution uniform --duration "$SECS" \
      --seed "$rep" --json "$W/$name-$rep.json" >/dev/null 2>&1
    python3 - "$name" "$rep" "$items" "$W/$name-$rep.json" <<'PY' | tee -a "$out"
import json, sys
name, rep, items, f = sys.argv[1:]
r = json.load(open(f))["run"]
hits_s = r["hits"] / r["seconds"]
print(f"{name}\t{rep}\t{r['ops_per_sec']:.0f}\t{hits_s:.0f}\t{r['hit_ratio']:.3f}\t{items}")
PY
  done
  kill "$pid" 2>/dev/null; for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  peak=$(cat "$(cgdir "et-$name")/memory.max_usage_in_bytes" 2>/dev/null || echo 0)
  oom=$(awk '$1 == "oom_kill" {print $2}' "$(cgdir "et-$name")/memory.oom_control" 2>/dev/null)
  echo "$name: cgroup peak $(( peak >> 20 )) MiB, oom kills ${oom:-?}"
  rmdir "$(cgdir "et-$name")" 2>/dev/null
done
rm -rf "$W/data"
sort -t$'\t' -k1,1 -k4,4n "$out" | awk -F'\t' '
  {v[$1] = v[$1] " " $4; n[$1]++}
  END {for (k in v) {split(substr(v[k], 2), a, " "); m = a[int((n[k] + 1) / 2)];
       if (m > best) {best = m; bk = k}} printf "best: %s, median %d GET hits/s\n", bk, best}'

#!/usr/bin/env bash
# Soak run of issue 12 (not CI): `nvdepot memcache` under a paced load at
# SHARE (default 0.8) of the peak measured first, for MINUTES (default
# 30), its resident memory sampled every 10 s. Passes when the load
# generator saw no error reply and no value mismatch, and RSS is flat:
# after the first minute it never exceeds the first minute's peak by more
# than 10 %.
#
#     bash scripts/soak.sh [MINUTES] [SHARE]
#
# Run it on an otherwise idle machine: the load generator shares the cores.
# Prints `soak minutes=… peak=… rate=… achieved=… errors=… mismatches=…
# rss_first_min_mb=… rss_max_mb=… rss_last_mb=…`; the RSS samples go to
# $OUT (default /tmp/nvdepot-soak.csv).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
minutes=${1:-30}
share=${2:-0.8}
out=${OUT:-/tmp/nvdepot-soak.csv}
bin=$(release_binary "$repo")
work=$(mktemp -d)
port=22133
cleanup() {
    [ -n "${server:-}" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

"$bin" memcache -p "$port" -l 127.0.0.1 --data "$work/data" --size 2G -m 64 \
    2>"$work/server.log" &
server=$!
for _ in $(seq 100); do
    grep -q "listening on" "$work/server.log" && break
    sleep 0.1
done
load=(--server "127.0.0.1:$port" --connections 16 --keys 200000 --value-size 1024)
"$bin" bench memcache "${load[@]}" --preload --requests 0 >/dev/null
"$bin" bench memcache "${load[@]}" --duration 15 --json "$work/peak.json" >/dev/null
peak=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['run']; print(int((r['gets']+r['sets'])/r['seconds']))" "$work/peak.json")
rate=$(python3 -c "print(int($peak * $share))")
echo "peak $peak requests/s; soaking at $rate requests/s for $minutes min" >&2

echo "seconds,rss_kib" >"$out"
(
    t=0
    while kill -0 "$server" 2>/dev/null; do
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status" 2>/dev/null || echo 0)
        echo "$t,$rss" >>"$out"
        sleep 10
        t=$((t + 10))
    done
) &
sampler=$!
status=0
"$bin" bench memcache "${load[@]}" --duration $((minutes * 60)) --rate "$rate" \
    --verify 0.05 --json "$work/soak.json" >"$work/soak.txt" || status=$?
kill "$sampler" 2>/dev/null || true
python3 - "$work/soak.json" "$out" "$minutes" "$peak" "$rate" "$status" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["run"]
minutes, peak, rate, status = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
rows = [l.strip().split(",") for l in open(sys.argv[2]).readlines()[1:]]
rss = [(int(t), int(k)) for t, k in rows if k.isdigit()]
first = max([k for t, k in rss if t <= 60] or [0])
later = [k for t, k in rss if t > 60]
top = max(later or [first])
achieved = int((run["gets"] + run["sets"]) / run["seconds"])
flat = top <= first * 1.10
ok = status == 0 and run["errors"] == 0 and run["mismatches"] == 0 and flat
print(f"soak minutes={minutes} peak={peak} rate={rate} achieved={achieved} "
      f"errors={run['errors']} mismatches={run['mismatches']} samples={len(rss)} "
      f"rss_first_min_mb={first/1024:.1f} rss_max_mb={top/1024:.1f} "
      f"rss_last_mb={rss[-1][1]/1024 if rss else 0:.1f} flat={'yes' if flat else 'no'} "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY

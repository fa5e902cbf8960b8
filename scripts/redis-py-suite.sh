#!/usr/bin/env bash
# redis-py's own test suite against `nvdepot serve`: the tests of the
# redis-py release installed here (its source distribution from PyPI),
# the files about commands, pipelines, Pub/Sub, scripts, functions, locks,
# client-side caching, connections and MONITOR, run with pytest against a fresh
# server. The cases that fail are compared with
# scripts/redis-py-expected-failures.txt (each there with the reason: a
# command not built yet, a setting fixed at start-up, or a test written
# for a newer Redis than the 7.0 this server follows, which fails against
# redis-server 7.0 too): a new failure fails the script; a listed case
# that now passes is reported, to be taken off the list.
#
#     bash scripts/redis-py-suite.sh            # NVDEPOT_BIN: the server binary
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"
ensure_cargo
pip_install() {
    python3 -m pip install --quiet "$@" 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages "$@"
}
python3 -c 'import redis' 2>/dev/null || pip_install redis
python3 -c 'import pytest, pytest_timeout, pytest_asyncio' 2>/dev/null ||
    pip_install pytest pytest-timeout pytest-asyncio
version=$(python3 -c 'import redis; print(redis.__version__)')
cd "$repo"
bin=$(nvdepot_binary "$repo")
work=$(mktemp -d "$(dirname "$(dirname "$bin")")/redis-py-suite.XXXXXX")
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-binary :all: --no-deps "redis==$version" -d "$work" >/dev/null
tar -xzf "$work/redis-$version.tar.gz" -C "$work"
suite=$work/redis-$version
"$bin" serve --port 0 --data "$work/store" --size 256M --segment-size 8M --appendfsync everysec \
    2>"$work/serve.log" &
pid=$!
for _ in $(seq 1 600); do
    grep -q 'listening on' "$work/serve.log" && break
    sleep 0.1
done
port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
[[ -n $port ]] || { cat "$work/serve.log"; echo "FAIL: nvdepot serve did not start"; exit 1; }
files=()
for f in commands pubsub scripting lock pipeline function hash encoding keyspace_notifications \
    cache connection_pool data_structure client monitor; do
    files+=("tests/test_$f.py")
done
echo "== redis-py $version's tests (${files[*]}) against nvdepot serve on port $port"
(cd "$suite" && timeout 1800 python3 -m pytest "${files[@]}" -q -p no:cacheprovider \
    --timeout 60 --redis-url="redis://127.0.0.1:$port/0" --junitxml="$work/junit.xml" \
    >"$work/pytest.log" 2>&1) || true
tail -1 "$work/pytest.log"
[[ -s $work/junit.xml ]] || { tail -40 "$work/pytest.log"; echo "FAIL: pytest did not run"; exit 1; }
python3 - "$work/junit.xml" "$repo/scripts/redis-py-expected-failures.txt" <<'PY'
import sys, xml.etree.ElementTree as ET
failed = set()
for tc in ET.parse(sys.argv[1]).iter("testcase"):
    if any(c.tag in ("failure", "error") for c in tc):
        failed.add(tc.get("classname").removeprefix("tests.") + "::" + tc.get("name"))
expected = set()
for line in open(sys.argv[2]):
    line = line.split("#")[0].strip()
    if line:
        expected.add(line)
new, fixed = sorted(failed - expected), sorted(expected - failed)
for case in fixed:
    print(f"now passes (take it off the list): {case}")
for case in new:
    print(f"FAIL (not in the expected failures): {case}")
print(f"{len(failed)} failing, {len(expected)} expected, {len(new)} new, {len(fixed)} fixed")
sys.exit(1 if new else 0)
PY

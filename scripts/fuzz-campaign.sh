#!/usr/bin/env bash
# The long fuzz campaign of issue 12 (not CI): every fuzz target for RUNS
# executions (default 10 000 000), one after the other, each from its
# committed seeds plus what earlier campaigns found, then minimises each
# corpus back into the committed seeds (`cargo fuzz cmin`), so the next
# run (and CI's smoke run) starts from everything found so far.
#
#     [JOBS=2] bash scripts/fuzz-campaign.sh [RUNS] [TARGET...]
#
# JOBS=N runs N libFuzzer processes sharing one corpus, RUNS/N executions
# each (their logs are summed), so a 10 M campaign uses every core.
# FUZZ_SANITIZER=none builds without AddressSanitizer, 2-4x faster: sound
# only where the code under test has no unsafe block of its own (the
# memcache crate forbids unsafe code; the engine's scanner is safe Rust,
# and the one unsafe type it reaches, crates/io's AlignedBuf, is tested
# under AddressSanitizer in CI by scripts/asan.sh). Panics, overflows and
# debug assertions are still caught. Default: address.
#
# Prints one line per target: executions, seconds, executions per second,
# coverage, corpus size; a failing input stops the campaign (it is saved
# under <fuzz dir>/artifacts/<target>/) and must become a regression test.
# Results of full runs: docs/RELIABILITY.md.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10000000}
shift || true
only=("$@")
toolchain=${FUZZ_TOOLCHAIN:-nightly}
jobs=${JOBS:-1}
sanitizer=${FUZZ_SANITIZER:-address}

# dir:target:max_len
targets=(
    fuzz:checkpoint:65536 fuzz:headers:256 fuzz:record:16384 fuzz:scan:65536
    fuzz:large:256
    crates/memcache/fuzz:text:4096 crates/memcache/fuzz:meta:4096
    crates/memcache/fuzz:meta_rules:4096 crates/memcache/fuzz:binary:4096
    crates/resp/fuzz:request:4096 crates/resp/fuzz:value:4096
)

for entry in "${targets[@]}"; do
    IFS=: read -r dir target max_len <<<"$entry"
    if ((${#only[@]})) && [[ ! " ${only[*]} " == *" $target "* ]]; then
        continue
    fi
    cd "$repo/$dir"
    mkdir -p "corpus/$target" "seeds/$target"
    cp -n "seeds/$target"/* "corpus/$target"/ 2>/dev/null || true
    log=$(mktemp)
    start=$(date +%s)
    if ((jobs > 1)); then
        # libFuzzer writes one fuzz-<n>.log per job into the working
        # directory; run them in a scratch one and sum their counts.
        jobdir=$(mktemp -d)
        (cd "$jobdir" && cargo "+$toolchain" fuzz run -s "$sanitizer" --fuzz-dir "$repo/$dir" "$target" \
            "$repo/$dir/corpus/$target" -- -runs=$((runs / jobs)) -jobs="$jobs" -workers="$jobs" \
            -max_len="$max_len" -timeout=10 -print_final_stats=1 \
            -artifact_prefix="$repo/$dir/artifacts/$target/") >"$log" 2>&1 \
            || { tail -40 "$jobdir"/fuzz-*.log; echo "FAILED: $target (see $dir/artifacts/$target)"; exit 1; }
        cat "$jobdir"/fuzz-*.log >"$log"
        rm -rf "$jobdir"
    else
        cargo "+$toolchain" fuzz run -s "$sanitizer" "$target" "corpus/$target" -- \
            -runs="$runs" -max_len="$max_len" -timeout=10 -print_final_stats=1 \
            >"$log" 2>&1 || { tail -40 "$log"; echo "FAILED: $target (see $dir/artifacts/$target)"; exit 1; }
    fi
    secs=$(( $(date +%s) - start ))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' \
        | awk '{ s += $1 } END { print s + 0 }')
    cov=$(grep -o 'cov: [0-9]*' "$log" | grep -o '[0-9]*' | sort -n | tail -1 || echo "?")
    # Minimise what was found into the committed seeds.
    rm -rf "seeds/$target.min" && mkdir "seeds/$target.min"
    cargo "+$toolchain" fuzz cmin -s "$sanitizer" "$target" "corpus/$target" -- -max_len="$max_len" >/dev/null 2>&1 || true
    cp "corpus/$target"/* "seeds/$target.min"/ 2>/dev/null || true
    # Named seeds (regressions, hand-made inputs) stay whatever cmin says:
    # only libFuzzer's own (40 hex digits) are replaced.
    for seed in "seeds/$target"/*; do
        if [[ -f $seed && ! $(basename "$seed") =~ ^[0-9a-f]{40}$ ]]; then
            cp -n "$seed" "seeds/$target.min"/
        fi
    done
    if [ -n "$(ls -A "seeds/$target.min")" ]; then
        rm -rf "seeds/$target" && mv "seeds/$target.min" "seeds/$target"
    else
        rm -rf "seeds/$target.min"
    fi
    files=$(ls "seeds/$target" | wc -l)
    echo "fuzz $target: executions=$execs seconds=$secs per_second=$(( ${execs:-0} / (secs > 0 ? secs : 1) )) coverage=$cov seeds=$files"
    rm -f "$log"
done

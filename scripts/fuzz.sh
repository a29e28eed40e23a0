#!/usr/bin/env bash
# Runs every cargo-fuzz target for a fixed time, keeps the (minimised) corpus, prints a summary.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 60. With no TARGET names every target of every fuzz crate
# (crates/security/fuzz, crates/codec/fuzz if present, crates/edge/fuzz, server/fuzz) runs. Corpora live in <crate>/fuzz/corpus/<target>/
# and are committed: `cargo test -p layercast-security --test fuzz_corpus` replays them on
# stable. Crashes land in <crate>/fuzz/artifacts/<target>/ (not committed; turn each into a
# corpus file or a unit test once fixed).
#
# Needs nightly and cargo-fuzz (`rustup toolchain install nightly`, `cargo install cargo-fuzz`).
# Environment: FUZZ_TARGET_DIR (build dir, default $CARGO_TARGET_DIR/fuzz or target/fuzz),
# FUZZ_SANITIZER (none|address, default none: the code is safe Rust, so the finding is a
# panic, and without ASan the runs are faster), FUZZ_MAX_LEN (default 4096 bytes).
# Exit status: 0 if no target crashed, 1 otherwise.
set -uo pipefail

secs=${1:-60}
shift || true
want=("$@")
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
tdir=${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$root/target}/fuzz}
san=${FUZZ_SANITIZER:-none}
maxlen=${FUZZ_MAX_LEN:-4096}
logdir=$(mktemp -d /tmp/lc-fuzz.XXXXXX)

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs nightly + cargo-fuzz (cargo +nightly fuzz --version failed)" >&2
    exit 2
fi

summary=()
crashed=0
for crate in crates/security crates/codec crates/edge server; do
    [ -f "$root/$crate/fuzz/Cargo.toml" ] || continue
    cd "$root/$crate" || exit 2
    echo "== building $crate/fuzz (sanitizer $san)"
    if ! cargo +nightly fuzz build -s "$san" --target-dir "$tdir" >"$logdir/$crate-build.log" 2>&1; then
        tail -20 "$logdir/$crate-build.log" >&2
        summary+=("$(printf '%-14s %-8s %s' "$crate/*" BUILD-FAIL "$logdir/$crate-build.log")")
        crashed=1
        continue
    fi
    for t in $(cargo +nightly fuzz list); do
        if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $t " ]]; then continue; fi
        corpus="fuzz/corpus/$t"
        mkdir -p "$corpus"
        before=$(find "$corpus" -type f | wc -l)
        log="$logdir/$t.log"
        echo "== $crate/$t: ${secs}s (corpus $before files)"
        cargo +nightly fuzz run -s "$san" --target-dir "$tdir" "$t" -- \
            -max_total_time="$secs" -max_len="$maxlen" -rss_limit_mb=2048 \
            -print_final_stats=1 >"$log" 2>&1
        rc=$?
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
        status=ok
        if [ $rc -ne 0 ]; then
            status=CRASH
            crashed=1
            grep -m3 -E 'panicked|Test unit written|ERROR' "$log" >&2
        fi
        # Keep only inputs that add coverage.
        cargo +nightly fuzz cmin -s "$san" --target-dir "$tdir" "$t" >"$logdir/$t-cmin.log" 2>&1 \
            || echo "   (cmin failed, corpus kept unminimised: $logdir/$t-cmin.log)"
        after=$(find "$corpus" -type f | wc -l)
        bytes=$(du -sb "$corpus" | cut -f1)
        summary+=("$(printf '%-14s %-6s %12s %8s %6s -> %-6s %8s' "$t" "$status" "${execs:-?}" "${cov:-?}" "$before" "$after" "$bytes")")
    done
done

echo
printf '%-14s %-6s %12s %8s %16s %8s\n' target status execs cov "corpus files" bytes
for l in "${summary[@]}"; do echo "$l"; done
echo "logs: $logdir"
exit $crashed

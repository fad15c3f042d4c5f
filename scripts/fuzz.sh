#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for a bounded time (default 60 s each),
# starting from the seed corpus in fuzz/corpus/<target>. New inputs go to
# a scratch directory; a crash stops the script with the failing input in
# fuzz/artifacts/<target>/.
#
#   bash scripts/fuzz.sh            # 60 s per target
#   bash scripts/fuzz.sh 600 http   # 10 minutes of one target
#   bash scripts/fuzz.sh build      # only build the targets
#
# The build and the runs must see the same environment (CI sets
# CARGO_PROFILE_RELEASE_OPT_LEVEL for both), or a run builds again.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

if [ "${1:-}" = build ]; then
    cd fuzz
    exec cargo +nightly fuzz build
fi

seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(imports http component args sql)
fi

# The http target reaches a real actor when the counter is built.
counter=target/wasm32-wasip2/guest/counter.wasm
if [ -f "$counter" ]; then
    export BURROW_FUZZ_COUNTER=$PWD/$counter
fi

cd fuzz
cargo +nightly fuzz build
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
    echo "==> fuzzing $target for $seconds s"
    mkdir -p "$scratch/$target" "corpus/$target"
    cargo +nightly fuzz run "$target" "$scratch/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=4096 -print_final_stats=1
done
echo "==> no crash"

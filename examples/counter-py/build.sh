#!/usr/bin/env bash
# Builds the Python counter actor into a WebAssembly component.
#
#   examples/counter-py/build.sh [OUTPUT]
#
# OUTPUT defaults to target/guests/counter-py.wasm at the repository root.
# Needs componentize-py 0.25.1 (`pip install componentize-py==0.25.1`), which
# generates the bindings for wit/actor.wit on the fly: nothing is written
# next to the sources.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../target/guests/counter-py.wasm}"
mkdir -p "$(dirname "$out")"

componentize-py \
    --wit-path "$here/../../wit" \
    --world actor \
    componentize \
    --python-path "$here" \
    --output "$out" \
    app

#!/usr/bin/env bash
# Builds the Python mailer actor into a WebAssembly component.
#
#   examples/mailer-py/build.sh [OUTPUT]
#
# OUTPUT defaults to target/guests/mailer-py.wasm at the repository root.
# Needs componentize-py 0.25.1 (scripts/setup.sh installs it); uses the SDK
# in guest-sdk-py (`pip install ./guest-sdk-py` makes `python3 -m
# burrow.build` work from anywhere).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
out="${1:-$root/target/guests/mailer-py.wasm}"
PYTHONPATH="$root/guest-sdk-py${PYTHONPATH:+:$PYTHONPATH}" \
    exec python3 -m burrow.build "$here/app.py" -o "$out"

#!/usr/bin/env bash
# Installs what building and testing Burrow needs beyond the Rust toolchain:
# the wasm32-wasip2 target (Rust actors) and componentize-py (the Python
# example actor).
set -euo pipefail

rustup target add wasm32-wasip2
if ! command -v componentize-py >/dev/null 2>&1 \
    || [ "$(componentize-py --version 2>/dev/null | awk '{print $2}')" != "0.25.1" ]; then
    python3 -m pip install --quiet --disable-pip-version-check componentize-py==0.25.1
fi

#!/usr/bin/env bash
# Installs what building and testing Burrow needs beyond the Rust toolchain:
# the wasm32-wasip2 target (Rust actors), componentize-py (the Python
# actors) and the JavaScript SDK's packages, componentize-js among them
# (the JavaScript actors; needs Node.js 20 or later with npm), and
# Debian's chromium and chromium-driver (the web inspector's browser test),
# and Debian's python3-venv where venv lacks pip (new Python projects).
# Each step is skipped when what it installs is there already.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-wasip2
if ! command -v componentize-py >/dev/null 2>&1 \
    || [ "$(componentize-py --version 2>/dev/null | awk '{print $2}')" != "0.25.1" ]; then
    python3 -m pip install --quiet --disable-pip-version-check componentize-py==0.25.1
fi

# guest-sdk-js/package-lock.json pins componentize-js and every package
# under it; `npm ci` installs exactly that tree, and a stamp of the lock
# file skips it when the tree is already the locked one.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: Node.js 20 or later with npm is needed to build the JavaScript actors" >&2
    exit 1
fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    echo "setup: Node.js $(node --version) is too old for componentize-js; install 20 or later" >&2
    exit 1
fi
lock_sum="$(sha256sum guest-sdk-js/package-lock.json | awk '{print $1}')"
stamp=guest-sdk-js/node_modules/.burrow-installed
if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]; then
    npm ci --prefix guest-sdk-js --no-audit --no-fund --loglevel=error
    echo "$lock_sum" >"$stamp"
fi

# New Python projects (scripts/new-projects.sh) make a virtual environment;
# Debian ships venv's pip bootstrap apart, in python3-venv.
if ! python3 -c 'import ensurepip' >/dev/null 2>&1 && command -v apt-get >/dev/null; then
    echo "==> installing python3-venv (Debian's venv with pip)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq python3-venv >/dev/null
fi

# The web inspector's test drives headless Chromium over WebDriver.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "==> installing Chromium and its WebDriver (Debian's chromium, chromium-driver)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq chromium chromium-driver >/dev/null
fi

#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, the integration tests in
# tests/all (guest test programs, the Python and JavaScript actors among
# them, are built into components first), the guest SDK's doc tests, and the
# JavaScript SDK's unit tests (under Node, against a fake host).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo test --workspace
npm test --prefix guest-sdk-js

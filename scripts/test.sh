#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, the integration tests in
# tests/all (guest test programs are built into components first), and the
# guest SDK's doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo test --workspace

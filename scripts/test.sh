#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, the integration tests in
# tests/all (guest test programs, the Python examples and the conformance
# actors are built into components first, by tests/artifacts/build.rs), the
# guest SDK's doc tests, and the Python SDK's unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
python3 -m unittest discover -s guest-sdk-py/tests
cargo test --workspace

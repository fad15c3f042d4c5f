#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, the integration tests in
# tests/all (guest test programs, the Python and JavaScript actors and the
# conformance actors are built into components first, by
# tests/artifacts/build.rs; the cluster tests run against a private
# PostgreSQL started here and stopped afterwards), the guest SDK's doc
# tests, the unit tests of the Python SDK and of the JavaScript SDK
# (under Node, against a fake host), and a newcomer's path outside the
# repository (scripts/new-projects.sh: install, `burrow new`, build, test,
# serve and call, in each language), and the shell blocks of README.md and
# docs/ as a reader runs them (scripts/doc-blocks.py; tests/all/docs.rs
# checks the other blocks).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
python3 -m unittest discover -s guest-sdk-py/tests
python3 -m unittest discover -s scripts -p 'test_*.py'
postgres_dir=$(mktemp -d -t burrow-test-pg-XXXXXX)
chmod 755 "$postgres_dir"
trap 'bash scripts/postgres.sh stop "$postgres_dir"; rm -rf "$postgres_dir"' EXIT
BURROW_TEST_POSTGRES=$(bash scripts/postgres.sh start "$postgres_dir")
export BURROW_TEST_POSTGRES
cargo test --workspace
npm test --prefix guest-sdk-js
bash scripts/new-projects.sh
python3 scripts/doc-blocks.py

#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, the integration tests in
# tests/all (guest test programs are built into components first; the
# cluster tests run against a private PostgreSQL started here and stopped
# afterwards), and the guest SDK's doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
postgres_dir=$(mktemp -d -t burrow-test-pg-XXXXXX)
chmod 755 "$postgres_dir"
trap 'bash scripts/postgres.sh stop "$postgres_dir"; rm -rf "$postgres_dir"' EXIT
BURROW_TEST_POSTGRES=$(bash scripts/postgres.sh start "$postgres_dir")
export BURROW_TEST_POSTGRES
cargo test --workspace

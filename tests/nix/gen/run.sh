#!/usr/bin/env bash
# Tests of `nivis gen` output with real Nix (see tests/nix/gen/run.py for the sections).
#
# Generates the hand-made providers of src/codegen/tests.rs (alpha, like the fake provider;
# kinds, every nesting mode and type) and a large synthetic one (1500 resource types) into a
# temporary directory through the codegen unit test `write_for_nix_tests`, then evaluates
# them with nix.
#
# Usage: tests/nix/gen/run.sh [SECTION...]     (valid throws warns lazy timing; default all)
# Environment: NIVIS_GEN_CRATE  the crate to run that test in (default: this repository; a
#                               scratch crate that includes src/codegen/mod.rs by path works too)
#              CARGO_PROFILE    cargo profile for it (default: dev)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
crate="${NIVIS_GEN_CRATE:-$root}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

(cd "$crate" && NIVIS_GEN_OUT="$out" NIVIS_GEN_LARGE=1 \
  cargo test --profile "${CARGO_PROFILE:-dev}" --lib -- --exact codegen::tests::write_for_nix_tests --nocapture)
python3 "$here/run.py" "$out" "$@"

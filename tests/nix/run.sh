#!/usr/bin/env bash
# Run the Nix library tests (see tests/nix/run.py for the sections).
# Usage: tests/nix/run.sh [unit|throws|phases|property|timing ...]
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/run.py" "$@"

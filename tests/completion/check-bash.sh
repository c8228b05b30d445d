#!/usr/bin/env bash
# Loads `nivis completion bash` into this bash and completes command lines with it, the way
# bash does on TAB. Used by tests/e2e/cli.rs and by the flake's `cli` check.
#
# Usage: check-bash.sh [STATE_FILE ID]
#   With a state file holding resource ID, also checks that resource ids are completed from
#   it (state show, --target, output).
# Needs `nivis` on PATH: the script calls back into it.
set -euo pipefail

# shellcheck disable=SC1090
source <(nivis completion bash)

fail=0
# complete WORD... : the candidates for the last word (empty string: a new word).
complete_line() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMP_TYPE=9
  COMPREPLY=()
  _clap_complete_nivis nivis "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
  printf '%s\n' "${COMPREPLY[@]}"
}

expect() { # expect WANT WORD... : WANT is among the candidates
  local want="$1"
  shift
  local got
  got="$(complete_line "$@")"
  if grep -qxF -- "$want" <<<"$got"; then
    echo "ok: nivis ${*:2} -> $want"
  else
    echo "FAIL: completing '$*' did not offer '$want'; got:" >&2
    sed 's/^/    /' <<<"$got" >&2
    fail=1
  fi
}

refuse() { # refuse UNWANTED WORD... : UNWANTED is not among the candidates
  local unwanted="$1"
  shift
  if complete_line "$@" | grep -qxF -- "$unwanted"; then
    echo "FAIL: completing '$*' offered '$unwanted'" >&2
    fail=1
  else
    echo "ok: nivis ${*:2} does not offer $unwanted"
  fi
}

expect state nivis st
expect show nivis state ""
expect --auto-approve nivis apply --auto
refuse --auto-approve nivis plan --auto
expect bash nivis completion ""
if [ $# -ge 2 ]; then
  expect "$2" nivis state show --state "$1" ""
  expect "$2" nivis plan --state "$1" --target ""
  expect "$2" nivis output --state "$1" ""
fi
exit $fail

#!/usr/bin/env bash
# Installs what Nivis needs to build and test on Debian/Ubuntu, and nothing that is already there.
# Idempotent, non-interactive; uses sudo only when not run as root.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need=()
command -v nix >/dev/null 2>&1 || need+=(nix-bin)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v git >/dev/null 2>&1 || need+=(git)
command -v groff >/dev/null 2>&1 || need+=(groff-base)   # the man page test renders them
command -v dot >/dev/null 2>&1 || need+=(graphviz)       # the `nivis graph` test renders its DOT
command -v age >/dev/null 2>&1 || need+=(age)            # the secret-store input tests encrypt with it
command -v openssl >/dev/null 2>&1 || need+=(openssl)    # the provider mutual-TLS test offers a wrong certificate
# The real-LXD tests (tests/lxd.py starts the daemon; busybox-static is the containers' image).
command -v lxd >/dev/null 2>&1 || [ -x /usr/sbin/lxd ] || need+=(lxd)
command -v lxc >/dev/null 2>&1 || need+=(lxd-client)
[ -x /bin/busybox ] && dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)

if [ "${#need[@]}" -gt 0 ]; then
  echo "install.sh: installing ${need[*]}" >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install.sh: a Rust toolchain (cargo) is required; install it with rustup" >&2
  exit 1
fi

if ! python3 -c 'import jsonschema' >/dev/null 2>&1; then
  echo "install.sh: installing the Python package jsonschema" >&2
  python3 -m pip install --quiet jsonschema 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages jsonschema
fi

# Debian's nix-bin runs without a daemon for root; other users need the daemon socket.
if [ "$(id -u)" -ne 0 ] && [ -S /nix/var/nix/daemon-socket/socket ]; then
  export NIX_REMOTE=daemon
fi
nix --extra-experimental-features 'nix-command flakes' eval --expr '1 + 1' >/dev/null

# The flake's checks: what can run in the build sandbox (no network, no provider binaries).
#
#   package         the build and its unit tests (nix/package.nix runs `cargo test --lib`)
#   nix-library     tests/nix/run.py unit throws phases property, with a private Nix store
#   ir-conformance  tests/ir-conformance/check.py test
#   cli             the installed binary: the book's CLI reference is current, the bash
#                   completion loads and completes, the man pages render
#
# The end-to-end suites start real provider processes and fetch real provider binaries,
# so scripts/test.sh runs them instead.
{
  pkgs,
  src,
  nivis,
}:
let
  python = pkgs.python3.withPackages (ps: [ ps.jsonschema ]);

  # Nix inside a build: a store, state and configuration of its own under the build
  # directory.
  privateNix = ''
    export NIX_ROOT="$PWD/nix-root"
    export NIX_BUILD_HOOK=
    export NIX_CONF_DIR="$NIX_ROOT/etc"
    export NIX_LOCALSTATE_DIR="$NIX_ROOT/var"
    export NIX_LOG_DIR="$NIX_ROOT/var/log/nix"
    export NIX_STATE_DIR="$NIX_ROOT/var/nix"
    export NIX_STORE_DIR="$NIX_ROOT/store"
    export HOME="$PWD/home"
    mkdir -p "$NIX_CONF_DIR" "$HOME"
    nix-store --init
  '';
in
{
  package = nivis;

  nix-library =
    pkgs.runCommand "nivis-nix-library-tests"
      {
        nativeBuildInputs = [
          pkgs.nix
          python
        ];
      }
      ''
        ${privateNix}
        cp -r ${src} source && chmod -R u+w source
        python3 source/tests/nix/run.py unit throws phases property
        touch $out
      '';

  ir-conformance = pkgs.runCommand "nivis-ir-conformance" { nativeBuildInputs = [ python ]; } ''
    cp -r ${src} source && chmod -R u+w source
    python3 source/tests/ir-conformance/check.py test
    touch $out
  '';

  cli =
    pkgs.runCommand "nivis-cli"
      {
        nativeBuildInputs = [
          nivis
          pkgs.bashInteractive
          pkgs.groff
        ];
      }
      ''
        nivis man --markdown > reference.md
        if ! diff -u ${src}/docs/book/src/reference/cli.md reference.md; then
          echo "docs/book/src/reference/cli.md is stale: regenerate it with" >&2
          echo "  nivis man --markdown > docs/book/src/reference/cli.md" >&2
          exit 1
        fi
        bash ${src}/tests/completion/check-bash.sh
        mkdir man && nivis man --dir man
        for page in man/*.1; do
          groff -man -Tutf8 -ww -z "$page"
        done
        touch $out
      '';
}

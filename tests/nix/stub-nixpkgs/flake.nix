# A stand-in for nixpkgs, for checking Nivis's flake outputs where nixpkgs cannot be fetched
# (tests/e2e/flake.rs uses it with --override-input nixpkgs). It has just the attributes those
# outputs use. Every package is a derivation that refuses to build: this checks that the
# outputs evaluate, have the right shape and pass the right arguments, not that they build.
{
  description = "nixpkgs stand-in: evaluates, never builds";
  outputs =
    { self }:
    {
      legacyPackages = builtins.listToAttrs (
        map
          (system: {
            name = system;
            value = import ./pkgs.nix { inherit system; };
          })
          [
            "x86_64-linux"
            "aarch64-linux"
          ]
      );
    };
}

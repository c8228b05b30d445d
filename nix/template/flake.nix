{
  description = "Infrastructure as Nix code, applied with Nivis";

  # Nivis's Nix library (nivis.lib). Builtins only: evaluating this flake needs no nixpkgs.
  # To use a local clone or an offline mirror of Nivis instead, keep this line and run
  #   nix flake lock --override-input nivis git+file:///srv/nivis
  # (git+file: copies only tracked files into the Nix store; path: would copy build output too).
  inputs.nivis.url = "github:wearetechnative/nivis";

  outputs =
    { self, nivis }:
    let
      lib = nivis.lib;
    in
    {
      # `nix fmt` formats this project's Nix files with the formatter Nivis itself uses
      # (nixfmt, from the nixpkgs Nivis's flake.lock pins). Fetched only when `nix fmt` runs:
      # `nivis plan` and `nivis apply` never need nixpkgs.
      inherit (nivis) formatter;

      # Nivis keeps this project's state outside the directory and finds it by the git
      # repository's first commit, so moves and clones keep it. Outside git (or in a shallow
      # clone), name the project instead; every project needs its own name:
      # nivis.project = "hello-nivis";

      # `nix flake check` evaluates the plan offline (no provider, no credentials) and checks
      # its IR: against the outputs in nivis-ledger.json once you record them
      # (`nivis output --json > nivis-ledger.json`), and against the IR snapshot in
      # nivis-ir.json once you pin one (the book's "Reviewing changes" chapter says how).
      checks = builtins.listToAttrs (
        map
          (system: {
            name = system;
            value = lib.checks {
              plan = self.nivis.plan;
              ledger = if builtins.pathExists ./nivis-ledger.json then ./nivis-ledger.json else { };
              golden = if builtins.pathExists ./nivis-ir.json then ./nivis-ir.json else null;
            };
          })
          [
            "x86_64-linux"
            "aarch64-linux"
          ]
      );

      # `nivis plan` and `nivis apply` evaluate this function of the outputs ledger (what the
      # providers have produced so far), phase after phase.
      nivis.plan =
        ledger:
        let
          variables = {
            greeting = {
              type = "string";
              default = "hello";
              description = "A word the first resource keeps as a trigger";
            };
          };
          var = lib.vars ledger variables;

          first = lib.mkResource {
            provider = "null";
            type = "null_resource";
            name = "first";
            config.triggers.greeting = var.greeting;
          };

          # A string Nix builds from first's id, which exists only once first is created:
          # Nivis applies first, evaluates this flake again, then creates second.
          second = lib.mkResource {
            provider = "null";
            type = "null_resource";
            name = "second";
            config.triggers.after = lib.str [ "after-" (first.refAttr "id") ];
          };
        in
        lib.toIR {
          providers.null = lib.mkProvider {
            source = "hashicorp/null";
            version = ">= 2.1";
          };
          resources = [
            first
            second
          ];
          # A value for Nix itself (a NixOS option, a file): `nivis output summary`.
          consumers.summary = lib.str [
            var.greeting
            " from "
            (second.refAttr "id")
          ];
          inherit variables ledger;
        };
    };
}

{
  description = "Nivis: Terraform/OpenTofu providers driven from Nix, phase after phase, to a fixpoint";

  # nixpkgs builds the package, app, dev shell, checks and formatter, and nothing else. Nix
  # fetches a flake input only when an output that uses it is evaluated, and flake.lock
  # records it, so `lib`, `nivis.*` and `templates` evaluate with builtins alone: offline,
  # with an empty registry and no nixpkgs anywhere (tests/e2e/flake.rs proves it).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs =
    { self, nixpkgs }:
    let
      lib = import ./nix;

      # Linux only: provider processes are tied to nivis with prctl(PR_SET_PDEATHSIG).
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forSystems =
        f:
        builtins.listToAttrs (
          map (system: {
            name = system;
            value = f system nixpkgs.legacyPackages.${system};
          }) systems
        );
    in
    {
      # The Nix library: mkProvider, mkResource, mkData, str, compute, drv, count,
      # forEach, byKey, vars, toIR (see nix/default.nix and docs/IR-CONTRACT.md).
      # Builtins only: it never needs nixpkgs.
      inherit lib;

      # Plans are functions ledger -> IR; the CLI evaluates nivis.plan by default.
      nivis = {
        # Two fake providers, three Nix-mediated hops: applies in three phases.
        plan = import ./nix/examples/two-providers.nix { inherit lib; };
        # What `nivis test` expects of it with the fake providers: three phases, these outputs.
        test = builtins.fromJSON (builtins.readFile ./nix/examples/two-providers.test.json);
        # The same graph with A.label derived from C.value: a dependency cycle.
        cycle = import ./nix/examples/two-providers.nix {
          inherit lib;
          cycle = true;
        };
      };

      # `nix flake init -t <this flake>`: a starter project on hashicorp/null. Builtins only.
      templates.default = {
        path = ./nix/template;
        description = "A Nivis project: hashicorp/null resources, a variable and a Nix consumer";
        welcomeText = ''
          # A Nivis project

          `flake.nix` declares two null_resource objects; the second is built by Nix from
          the first one's id, so `nivis apply` takes two phases. Next:

              nivis plan
              nivis apply
              nivis output

          Offline? `nivis plan --mirror DIR` installs hashicorp/null from a filesystem
          mirror (see the book's air-gapped chapter).
        '';
      };

      # `nix flake init -t <this flake>#modules`: the same, written as modules (network,
      # database, app) with policies beside the plan.
      templates.modules = {
        path = ./nix/template-modules;
        description = "A Nivis project written as modules (network, database, app), with policies";
        welcomeText = ''
          # A Nivis project written as modules

          `app.nix` imports `network.nix` and `database.nix` and sets their options;
          `flake.nix` evaluates them with lib.modules.toIR and lists the policies
          `nivis plan` and `nivis apply` check. Next:

              nivis plan
              nivis apply
        '';
      };

      overlays.default = final: prev: { nivis = final.callPackage ./nix/package.nix { }; };

      packages = forSystems (
        _system: pkgs:
        let
          nivis = pkgs.callPackage ./nix/package.nix { };
        in
        {
          inherit nivis;
          default = nivis;
        }
      );

      apps = forSystems (
        system: _pkgs: {
          default = {
            type = "app";
            program = "${self.packages.${system}.nivis}/bin/nivis";
          };
        }
      );

      devShells = forSystems (
        system: pkgs: {
          default = pkgs.mkShell {
            inputsFrom = [ self.packages.${system}.nivis ];
            packages = [
              pkgs.clippy
              pkgs.rustfmt
              pkgs.rust-analyzer
              pkgs.nix
              (pkgs.python3.withPackages (ps: [ ps.jsonschema ]))
            ];
          };
        }
      );

      formatter = forSystems (_system: pkgs: pkgs.nixfmt);

      # What runs in the build sandbox: the package (its build and unit tests), the Nix
      # library and IR conformance suites, and the installed CLI's completion, man pages and
      # book reference. The end-to-end suites need real provider binaries and run from
      # scripts/test.sh.
      checks = forSystems (
        system: pkgs: import ./nix/checks.nix {
          inherit pkgs;
          src = self;
          nivis = self.packages.${system}.nivis;
        }
      );
    };
}

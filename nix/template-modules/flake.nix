{
  description = "Infrastructure as Nix modules, applied with Nivis";

  # Nivis's Nix library (nivis.lib). Builtins only: evaluating this flake needs no nixpkgs.
  # For a local clone or an offline mirror:
  #   nix flake lock --override-input nivis git+file:///srv/nivis
  inputs.nivis.url = "github:wearetechnative/nivis";

  outputs =
    { self, nivis }:
    let
      lib = nivis.lib;
    in
    {
      # The project is three modules: each declares its options and defines its resources;
      # app.nix imports the other two and sets the options for this deployment.
      nivis.plan =
        ledger:
        lib.modules.toIR {
          modules = [ ./app.nix ];
          inherit ledger;
        };

      # Checked by `nivis plan` and `nivis apply` before anything changes.
      nivis.policies = [
        # On the evaluated resources, before any provider starts.
        (lib.policy.static {
          name = "owner-trigger";
          check = r: r.kind != "resource" || (r.config.triggers or { }) ? owner;
          message = r: "${r.id} names no owner (triggers.owner)";
        })
        # On each phase's planned changes, before the phase applies anything.
        (lib.policy.plan {
          name = "keep-the-database";
          level = "mandatory";
          check = change: !(change.address == "null.null_resource.database" && change.action != "create");
          message = change: "the database would be ${change.action}d";
        })
        (lib.policy.phase {
          name = "small-phases";
          level = "advisory";
          check = changes: builtins.length changes <= 5;
          message = changes: "${toString (builtins.length changes)} changes in one phase";
        })
      ];
    };
}

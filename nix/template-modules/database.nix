# The database: enabled by default, in the network; its version is the deployment's choice.
{ lib, config, ... }:
let
  inherit (lib.modules) mkOption mkIf types;
  cfg = config.database;
in
{
  options.database = {
    enable = mkOption {
      type = types.bool;
      default = true;
    };
    version = mkOption {
      type = types.enum [
        "15"
        "16"
      ];
      description = "The database's major version";
    };
    resource = mkOption {
      type = types.any;
      description = "The database resource (read by the app)";
    };
  };

  config = mkIf cfg.enable {
    database.resource = lib.mkResource {
      provider = "null";
      type = "null_resource";
      name = "database";
      config.triggers = {
        inherit (cfg) version;
        inherit (config) owner;
        # Known once the network exists: Nix builds it in the next phase.
        network = lib.str [ "net-" (config.network.resource.refAttr "id") ];
      };
    };
    nivis.resources = [ cfg.resource ];
    assertions = [
      {
        assertion = config.network.cidr != "0.0.0.0/0";
        message = "the database must not be on an open network";
      }
    ];
  };
}

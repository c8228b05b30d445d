# This deployment: the app's servers, and the choices for the other modules.
{ lib, config, ... }:
let
  inherit (lib.modules) mkOption types;
in
{
  imports = [
    ./network.nix
    ./database.nix
  ];

  options.app.replicas = mkOption {
    type = types.int;
    default = 2;
    description = "How many app servers";
  };

  config = {
    network.cidr = "10.20.0.0/16";
    database.version = "15";
    nivis.resources = lib.count config.app.replicas (
      i:
      lib.mkResource {
        provider = "null";
        type = "null_resource";
        name = "app";
        config.triggers = {
          inherit (config) owner;
          database = config.database.resource.refAttr "id";
        };
      }
    );
  };
}

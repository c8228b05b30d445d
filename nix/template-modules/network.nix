# The network: one option set by the deployment, one resource other modules read.
{ lib, config, ... }:
let
  inherit (lib.modules) mkOption mkDefault types;
in
{
  options.network = {
    cidr = mkOption {
      type = types.str;
      description = "The network's address range";
    };
    resource = mkOption {
      type = types.any;
      description = "The network resource (read by the other modules)";
    };
  };
  options.owner = mkOption {
    type = types.str;
    default = "platform-team";
    description = "Who answers for these resources";
  };

  config = {
    network.cidr = mkDefault "10.0.0.0/16";
    network.resource = lib.mkResource {
      provider = "null";
      type = "null_resource";
      name = "network";
      config.triggers = {
        inherit (config.network) cidr;
        inherit (config) owner;
      };
    };
    nivis.providers.null = lib.mkProvider {
      source = "hashicorp/null";
      version = ">= 2.1";
    };
    nivis.resources = [ config.network.resource ];
  };
}

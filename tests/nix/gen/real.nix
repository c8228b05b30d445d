# Constructors generated from real providers' schemas, when present: provider -> case ->
# { expr; expect ? null; }. With expect = null the expr is a plan that must pass check.py;
# otherwise evaluation must fail with expect in stderr. run.py's `real` section runs the
# providers found in the directory given as NIVIS_GEN_REAL (as `nivis gen` writes it).
{ root, gen, real }:
let
  t = import ./lib.nix { inherit root gen; };
  inherit (t) lib;
  p = name: import (real + "/${name}") lib;
  plan = provider: resources: data: lib.toIR {
    providers.${provider} = lib.mkProvider { source = provider; };
    inherit resources data;
  };
in
{
  # hashicorp/null 2.1.2 (tfplugin5)
  null = let null = p "null"; R = null.resources.null_resource; in {
    valid.expr =
      let a = R { name = "a"; config.triggers = { x = "1"; n = 2; }; }; in
      plan "null" [ a (R { name = "b"; config.triggers.from = a.refAttr "id"; }) ]
        [ (null.data.null_data_source { name = "d"; config.inputs = { k = a.refAttr "id"; }; }) ];
    typo = { expr = R { name = "a"; config.trigger = { }; }; expect = "nivis: null_resource: unknown argument 'trigger'; did you mean 'triggers'?"; };
    mapType = { expr = R { name = "a"; config.triggers = [ "x" ]; }; expect = "null_resource: argument 'triggers' must be an attrset (a map), got a list"; };
    output = { expr = null.data.null_data_source { name = "d"; config.outputs = { }; }; expect = "null_data_source: 'outputs' is computed by the provider (an output); it cannot be set"; };
  };

  # workato/workato 0.16.0 (tfplugin6)
  workato = let w = p "workato"; F = w.resources.workato_folder; in {
    valid.expr = plan "workato" [ (F { name = "f"; config = { name = "Root"; folder_id = 1; force = true; }; }) ] [ ];
    missing = { expr = F { name = "f"; config.name = "Root"; }; expect = "nivis: workato_folder: missing required argument 'folder_id'"; };
    numberType = { expr = F { name = "f"; config = { name = "Root"; folder_id = "home"; }; }; expect = "workato_folder: argument 'folder_id' must be a number, got the string \"home\""; };
  };

  # hashicorp/aws (tfplugin5, the largest schema at hand; not in CI)
  aws = let aws = p "aws"; I = aws.resources.aws_instance; W = aws.resources.aws_wafv2_web_acl; in {
    valid.expr = plan "aws" [
      (I { name = "i"; config = { ami = "ami-1"; instance_type = "t3.micro"; tags.Name = "x"; root_block_device = [ { volume_size = 20; } ]; }; })
      (W { name = "w"; config = {
        scope = "REGIONAL"; name = "n";
        default_action = [ { allow = [ { } ]; } ];
        visibility_config = [ { cloudwatch_metrics_enabled = true; metric_name = "m"; sampled_requests_enabled = true; } ];
        rule = [ {
          name = "r"; priority = 1;
          action = [ { block = [ { } ]; } ];
          visibility_config = [ { cloudwatch_metrics_enabled = true; metric_name = "m"; sampled_requests_enabled = true; } ];
          statement = [ { and_statement = [ { statement = [
            { geo_match_statement = [ { country_codes = [ "US" ]; } ]; }
            { not_statement = [ { statement = [ { ip_set_reference_statement = [ { arn = "arn:x"; } ]; } ]; } ]; }
          ]; } ]; } ];
        } ];
      }; })
    ] [ ];
    typo = { expr = I { name = "i"; config.instance_typ = "t3"; }; expect = "nivis: aws_instance: unknown argument 'instance_typ'; did you mean 'instance_type'?"; };
    output = { expr = I { name = "i"; config.arn = "x"; }; expect = "aws_instance: 'arn' is computed by the provider (an output); it cannot be set"; };
    singleAsList = { expr = I { name = "i"; config.root_block_device = { volume_size = 1; }; }; expect = "aws_instance: argument 'root_block_device' takes a list of blocks"; };
  };
}

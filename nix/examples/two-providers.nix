# The headline two-provider example: unknowns originate in both providers and
# every hop crosses the Nix boundary, so applying it takes three phases.
#
#   alpha_token.A  (alpha)  no inputs
#     name  = "rec-" + A.value                      (derived from A.value)
#   beta_record.B  (beta)   from = name
#     final = B.endpoint + "::" + A.value           (derived from both providers)
#   alpha_token.C  (alpha)  label = final
#   consumer systemConfig reads B.endpoint, A.value and final.
#
# With cycle = true, A.label is derived from C.value: A waits on C, which waits
# on B, which waits on A. The IR is still well formed; the executor must report
# the cycle at the fixpoint.
{ lib, cycle ? false }:
ledger:
let
  inherit (lib) mkProvider mkResource str toIR;

  A = mkResource {
    provider = "alpha";
    type = "alpha_token";
    name = "A";
    config = if cycle then { label = str [ "from-c:" (C.refAttr "value") ]; } else { };
  };

  name = str [ "rec-" (A.refAttr "value") ];

  B = mkResource {
    provider = "beta";
    type = "beta_record";
    name = "B";
    config.from = name;
  };

  final = str [ (B.refAttr "endpoint") "::" (A.refAttr "value") ];

  C = mkResource {
    provider = "alpha";
    type = "alpha_token";
    name = "C";
    config.label = final;
  };
in
toIR {
  providers = {
    alpha = mkProvider { source = "provider-alpha"; };
    beta = mkProvider { source = "provider-beta"; };
  };
  resources = [ A B C ];
  consumers.systemConfig = {
    recordEndpoint = B.refAttr "endpoint";
    tokenValue = A.refAttr "value";
    combined = final;
  };
  inherit ledger;
}

# The Nivis Nix library. Builtins only: importing it pulls in nothing else.
#
#   mkProvider { source; version ? null; config ? {}; }
#   mkResource { provider; type; name; config ? {}; dependsOn ? []; lifecycle ? {}; }
#   mkData     { provider; type; name; config ? {}; dependsOn ? []; }
#     r.id, r.refAttr "attr", r.ref [ "net" 0 "ip" ]
#   str [ "literal" (r.refAttr "attr") ... ]      a string built from outputs
#   compute inputs f                              any value computed from outputs
#   drv derivation                                a build output (__build leaf)
#   count n (i: resource) / forEach set (key: value: resource) / byKey instances
#   vars ledger declarations                      variable values
#   toIR { providers; resources; data ? []; consumers ? {}; variables ? {}; ledger; }
#
# docs/IR-CONTRACT.md describes the IR that toIR returns and the ledger it reads.
let
  names = import ./lib/names.nix;
  values = import ./lib/values.nix { inherit names; };
  nodes = import ./lib/nodes.nix { inherit names values; };
  vars = import ./lib/vars.nix { inherit names; };
  ir = import ./lib/ir.nix { inherit names values nodes vars; };
in
{
  schemaVersion = 1;
  inherit (nodes) mkProvider mkResource mkData count forEach byKey drv;
  inherit (values) str compute;
  inherit (vars) vars;
  inherit (ir) toIR;
}

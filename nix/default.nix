# The Nivis Nix library. Builtins only: importing it pulls in nothing else.
#
#   mkProvider { source; version ? null; config ? {}; }
#     source: a registry address, a binary name, or a path (a Nix path is used as
#     its string, never copied to the store)
#   mkProvider { source; kind = "nixops4"; statelessTypes ? []; }
#                                           a NixOps4 resource provider (protocol v0):
#                                           no version, no config; statelessTypes are
#                                           re-created rather than updated
#   mkResource { provider; type; name; config ? {}; dependsOn ? []; lifecycle ? {}; importId ? null; }
#     importId: the provider's id of an existing object, adopted (imported) when
#     nothing is recorded at this address yet
#   mkData     { provider; type; name; config ? {}; dependsOn ? []; }
#   mkEphemeral { provider; type; name; config ? {}; }
#     an ephemeral resource ("ephemeral." id prefix): opened for one run, never stored;
#     its outputs (refAttr, str, compute) reach configs as __ephemeral values, allowed
#     only in write-only attributes, provider configs and other ephemeral configs
#     r.id                     "alpha.alpha_token.A" ("data." prefix for mkData)
#     r.refAttr "value"        a reference to one output attribute
#     r.ref [ "net" 0 "ip" ]   a reference into nested outputs (keys and indices)
#     dependsOn takes resources or id strings; lifecycle takes preventDestroy,
#     createBeforeDestroy, ignoreChanges ("tags.env", [ "tags" "a.b" ], "*"),
#     precondition = [ { condition = BOOL; message; } ] and
#     postcondition = [ { condition = self: BOOL; message; } ] (lib/conditions.nix),
#     replaceTriggeredBy = [ r (r.refAttr "id") ] (replaced when r changes or the output's
#     value differs from the one at the last apply)
#
#   str [ "rec-" (r.refAttr "value") ]      a string built from outputs
#   compute { ip = vm.refAttr "ip"; } ({ ip }: "http://${ip}")
#                                           any value computed from outputs; the
#                                           inputs may also be one reference or a list
#   drv derivation                          a build output (__build leaf)
#
#   count 3 (i: mkResource { name = "web"; ... })        -> web__0 web__1 web__2
#   forEach { a = 1; b = 2; } (key: value: mkResource { name = "web"; ... })
#                                                        -> web__a web__b
#     Give the base name; the helper appends __<key>. Both return lists (in index
#     or key order) whose elements carry `key`; forEach also takes a list of
#     strings. byKey turns such a list into an attrset keyed by key:
#     (byKey webs).a.refAttr "id".
#
#   moved { from = "alpha.alpha_token.old"; to = r; }
#                                           the object recorded at `from` is now r's (a
#                                           rename; no provider call); list these in
#                                           toIR's moved. Either end: a resource or an id
#
#   vars ledger declarations                variable values (from Nivis, defaults); a
#                                           sensitive one can be passed on or used in
#                                           str / compute (the result stays sensitive)
#   remoteState ledger "network"            another project's outputs: the state declared
#                                           as nivis.remoteStates.network = { backend; env ? ...; }
#                                           beside the plan, read by Nivis without its lock:
#                                           { name; lineage; serial; outputs."<id>".<attr>; }
#                                           (sensitive ones stay sensitive; lib/remote.nix)
#   typecheck                               checks used by `nivis gen` constructors
#   policy.static / policy.plan / policy.phase { name; level; check; message; }
#                                           rules for nivis.policies (lib/policy.nix)
#   modules.toIR { modules; ledger; }        the IR of a project written as modules
#                                           (lib/modules.nix: mkOption, types, mkIf, ...)
#   removed { from = "alpha.alpha_token.old"; destroy ? true; }
#                                           a resource no longer declared: forgotten without a
#                                           provider call (destroy = false) or destroyed; list
#                                           these in toIR's removed
#   check { name; assert; message; }       a check for toIR's checks: warned about when false
#                                           after the fixpoint (lib/conditions.nix)
#   toIR { providers; resources; data ? []; ephemeral ? []; consumers ? {}; variables ? {}; moved ? []; removed ? []; checks ? []; ledger ? {}; }
#
#   checks { plan; ledger ? {}; golden ? null; name ? "nivis-plan"; }
#                                           a flake's `checks`: the plan evaluated offline
#                                           against a recorded ledger, its IR well formed
#                                           (and equal to the golden snapshot); see
#                                           lib/checks.nix
#
# References and derived values are inert until toIR resolves them against the
# ledger. docs/IR-CONTRACT.md describes the IR that toIR returns and the ledger
# it reads.
let
  names = import ./lib/names.nix;
  values = import ./lib/values.nix { inherit names; };
  nodes = import ./lib/nodes.nix { inherit names values; };
  vars = import ./lib/vars.nix { inherit names values; };
  conditions = import ./lib/conditions.nix { inherit names; };
  ir = import ./lib/ir.nix { inherit names values nodes vars conditions; };
  typecheck = import ./lib/typecheck.nix { inherit names values; };
  policy = import ./lib/policy.nix;
  checks = import ./lib/checks.nix { };
  remote = import ./lib/remote.nix { inherit values; };
  self = {
    schemaVersion = 1;
    inherit (nodes) mkProvider mkResource mkData mkEphemeral count forEach byKey drv moved removed;
    inherit (conditions) check;
    inherit (values) str compute;
    inherit (vars) vars;
    inherit (remote) remoteState;
    inherit (ir) toIR;
    inherit (checks) checks;
    # Policy as code, listed beside the plan as nivis.policies (lib/policy.nix).
    policy = { inherit (policy) static plan phase; };
    # Infrastructure as modules (lib/modules.nix): options, imports, merging, assertions.
    modules = import ./lib/modules.nix { nivisLib = self; inherit ir nodes names; };
    # Runtime type checks used by constructors that `nivis gen` writes.
    inherit typecheck;
  };
in
self

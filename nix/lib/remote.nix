# Another project's outputs (DESIGN §98): the state declared beside the plan as
#   nivis.remoteStates.NAME = { backend = { ... }; env ? "default"; };
# is read by Nivis, without its lock, before the first evaluation, and handed over in the
# ledger's remoteStates (its secrets in the private channel's remoteStates).
#
#   lib.remoteState ledger "network"
#     -> { name; lineage; serial; outputs; }
#   outputs: that project's recorded outputs by resource id, as `nivis output` shows them
#   there: (lib.remoteState ledger "network").outputs."alpha.alpha_token.a".value
#
# The values are known when the plan is evaluated (plain Nix values: usable in forEach, count,
# conditions). A sensitive attribute there is a secret here, as a sensitive variable is: it can
# be passed on or computed with through lib.str / lib.compute, and stays sensitive in this
# plan's IR and state.
{ values }:
let
  inherit (builtins) attrNames concatStringsSep isAttrs isString mapAttrs throw;

  remoteState = ledger: name:
    let
      declared =
        if isAttrs ledger && isAttrs (ledger.remoteStates or null) then ledger.remoteStates else { };
      known = if declared == { } then "" else " (the ledger has: ${concatStringsSep ", " (attrNames declared)})";
      state = declared.${name} or (throw
        "nivis: lib.remoteState: no remote state '${name}' in the ledger${known}; declare it beside the plan as nivis.remoteStates.${name} = { backend = { ... }; } and run the plan through nivis");
      chan = values.channel ledger;
      secretOf = id: attr:
        let given = (((if chan == null then { } else chan.remoteStates or { }).${name} or { }).${id} or { }); in
        if chan == null then
          throw "nivis: remote state ${name}: ${id}.${attr} is sensitive and only Nivis can give Nix its value (through its private channel): run the plan through nivis"
        else given.${attr} or (throw "nivis: remote state ${name}: the private channel has no value for ${id}.${attr}; run the plan through nivis");
      # A placeholder is a top-level attribute (the ledger's unit); its value stays in the
      # channel until something computes with it.
      wrap = id: attrs: mapAttrs (attr: v:
        if values.isPlaceholder v
        then values.mkSecretOf "the output ${id}.${attr} of remote state ${name}" (secretOf id attr)
        else v) attrs;
    in
    if !isString name then throw "nivis: lib.remoteState ledger NAME: NAME must be a string, got ${builtins.typeOf name}"
    else {
      inherit name;
      inherit (state) lineage serial;
      outputs = mapAttrs wrap state.outputs;
    };
in
{
  inherit remoteState;
}

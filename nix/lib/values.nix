# Deferred values: references to provider outputs, values Nix derives from them
# (str, compute), and their resolution against the outputs ledger.
#
# A reference or derived value is inert data until toIR meets it while walking a
# config tree. There it is resolved against the ledger: a concrete value when every
# output it needs is known, otherwise an IR marker (__ref, __sensitiveRef,
# __derived). Using one as a plain string in Nix (interpolation, ++) fails with a
# message pointing at lib.str / lib.compute.
#
# Secrets: a sensitive output appears in the ledger only as a __sensitiveRef
# placeholder; its value is in the private channel (a 0600 file the executor names in
# ledger.secretsFile and deletes after the evaluation). A reference to it stays a
# __sensitiveRef. A value derived from it (or from a sensitive variable, see vars.nix)
# is computed with the secret read from the channel and emitted as
# { __sensitive = { value = ...; }; }, so the executor keeps it secret.
#
# Ephemeral resources (mkEphemeral): their results are never in the ledger, only in the
# channel's `ephemeral` section while the executor holds them open. A value built from one
# (or a reference to one) is emitted as { __ephemeral = { value = ...; }; } once the result
# is there, and as __derived until then.
{ names }:
let
  inherit (builtins)
    all any attrNames attrValues concatMap concatStringsSep elemAt genList head isAttrs
    isBool isFloat isFunction isInt isList isString length listToAttrs throw toJSON;

  isRef = x: isAttrs x && (x._type or null) == "nivis:ref";
  isDerived = x: isAttrs x && (x._type or null) == "nivis:derived";
  isSecret = x: isAttrs x && (x._type or null) == "nivis:secret";
  isDeferred = x: isRef x || isDerived x || isSecret x;

  # A sensitive variable's value: usable where a reference is (passed on directly, or
  # through lib.str / lib.compute), never as a plain Nix value.
  mkSecret = name: mkSecretOf "variable '${name}'";
  # A secret value described as `what` in errors (another project's sensitive output too).
  mkSecretOf = what: value: {
    _type = "nivis:secret";
    name = what;
    inherit value;
    __toString = self: throw
      "nivis: ${what} is sensitive: pass it on as it is, or build values from it with lib.str [ ... ] or lib.compute, which keep the result sensitive";
  };

  # "alpha.alpha_token.A.value" (the ledger entry a reference needs)
  refInput = ref: "${ref.resource}.${head ref.path}";
  showRef = ref: "${ref.resource}.${names.renderPath ref.path}";

  mkRef = resource: path: {
    _type = "nivis:ref";
    inherit resource path;
    __toString = self: throw
      "nivis: the output ${showRef self} is not known while Nix evaluates; build strings from it with lib.str [ ... ] or lib.compute";
  };

  # items: list of references / derived values / plain values; fn: list of their values -> value
  mkDerived = items: fn: {
    _type = "nivis:derived";
    inherit items fn;
    __toString = self: throw
      "nivis: a value derived from provider outputs (${concatStringsSep ", " (map refInput (pendingRefs self))}) cannot be used as a plain Nix string; nest it in lib.str [ ... ] or lib.compute";
  };

  pendingRefs = x:
    if isRef x then [ x ] else if isDerived x then concatMap pendingRefs x.items else [ ];

  partToString = what: v:
    if isString v then v
    else if isInt v then toString v
    else if isFloat v then toJSON v
    else if isBool v then (if v then "true" else "false")
    else if v == null then throw "nivis: lib.str: ${what} is null; a string needs a value there"
    else if (v._type or null) == "nivis:resource" then
      throw "nivis: lib.str: ${what} is the whole resource ${v.id}; use one of its outputs, e.g. (${v.name}.refAttr \"id\")"
    else throw "nivis: lib.str: ${what} is ${names.describe v}; turn it into a string with lib.compute first";

  # lib.str [ "rec-" (a.refAttr "value") ]: concatenate strings, numbers, booleans,
  # references and other derived values into one string.
  str = parts:
    if !isList parts then throw "nivis: lib.str expects a list of parts, got ${names.describe parts}"
    else
      let
        n = length parts;
        what = i: let p = elemAt parts i; in
          if isRef p then "the output ${showRef p} (part ${toString i})" else "part ${toString i}";
        join = vals: concatStringsSep "" (genList (i: partToString (what i) (elemAt vals i)) n);
      in
      if any isDeferred parts then mkDerived parts join else join parts;

  # lib.compute inputs f: apply f to the values of inputs once they are all known.
  # inputs is one reference/derived value, a list of them, or an attrset of them
  # (plain values may be mixed in); f receives the same shape with values filled in.
  compute = inputs: fn:
    let
      single = isDeferred inputs;
      keys = attrNames inputs;
      items =
        if single then [ inputs ]
        else if isList inputs then inputs
        else if isAttrs inputs then map (k: inputs.${k}) keys
        else throw "nivis: lib.compute expects a reference, a list or an attrset of inputs, got ${names.describe inputs}";
      rebuild = vals:
        if single then head vals
        else if isList inputs then vals
        else listToAttrs (genList (i: { name = elemAt keys i; value = elemAt vals i; }) (length keys));
    in
    if (inputs._type or null) == "nivis:resource" then
      throw "nivis: lib.compute: the inputs are the whole resource ${inputs.id}; pass its outputs, e.g. (${inputs.name}.refAttr \"id\")"
    else if !isFunction fn then throw "nivis: lib.compute: the second argument must be a function, got ${names.describe fn}"
    else if any isDeferred items then mkDerived items (vals: fn (rebuild vals))
    else fn inputs;

  # --- resolution against the ledger -------------------------------------------

  absent = { state = "absent"; };
  sensitive = { state = "sensitive"; };

  isPlaceholder = v: isAttrs v && v ? __sensitiveRef;

  # The private channel: { outputs.<id>.<attr> = secret; vars.<name> = value; }, or
  # null when the ledger names none (an evaluation not run by Nivis).
  channel = ledger:
    if isAttrs ledger && builtins.isString (ledger.secretsFile or null)
    then builtins.fromJSON (builtins.readFile ledger.secretsFile)
    else null;

  # The secret a sensitive reference stands for, read from the channel; `at` says
  # where it is used, for errors.
  secretOf = at: chan: ref:
    let
      go = v: i:
        if i == length ref.path then v
        else
          let s = elemAt ref.path i; in
          if isString s && isAttrs v && v ? ${s} then go v.${s} (i + 1)
          else if isInt s && isList v && s < length v then go (elemAt v s) (i + 1)
          else throw "nivis: ${at}: the private channel has no value for ${showRef ref}; evaluate the plan through nivis";
    in
    if chan == null then
      throw "nivis: ${at}: ${showRef ref} is sensitive and only Nivis can give Nix its value (through its private channel): run nivis, or pass the reference on without computing with it"
    else go ((chan.outputs or { }).${ref.resource} or { }) 0;

  # Follow a reference into ledger.outputs.
  # { state = "known"; value } | { state = "sensitive"; } | { state = "absent"; }
  lookup = outputs: ref:
    let
      path = ref.path;
      n = length path;
      go = v: i:
        if isPlaceholder v then sensitive
        else if i == n then { state = "known"; value = v; }
        else
          let s = elemAt path i; in
          if isString s then (if isAttrs v && v ? ${s} then go v.${s} (i + 1) else absent)
          else if isList v && s < length v then go (elemAt v s) (i + 1)
          else absent;
    in
    if outputs ? ${ref.resource} then go outputs.${ref.resource} 0 else absent;

  containsPlaceholder = v:
    if isAttrs v then isPlaceholder v || any containsPlaceholder (attrValues v)
    else if isList v then any containsPlaceholder v
    else false;

  # Resolve the inputs of a derived value.
  # ctx = { outputs; channel; checkRef = ref -> ref (throws if undeclared); at = string; }
  # -> { known = bool; sensitive = bool; value (when known); refs = [ref] }
  # A sensitive input is known: its value comes from the channel (read only if the
  # computation uses it), and it makes the result sensitive.
  resolveItem = ctx: x:
    if isRef x && (ctx.ephemeral or { }) ? ${x.resource} then
      # An ephemeral resource's result: only in the channel, only while the executor holds
      # it open; unknown (the value waits for Nix) until then.
      let
        ref = ctx.checkRef x;
        opened = if ctx.channel == null then { } else ctx.channel.ephemeral or { };
        r = lookup opened ref;
      in
      { known = r.state == "known"; sensitive = false; ephemeral = true; value = r.value or null; refs = [ ref ]; }
    else if isRef x then
      let
        ref = ctx.checkRef x;
        r = lookup ctx.outputs ref;
        secret = r.state == "sensitive" || (r.state == "known" && containsPlaceholder r.value);
      in
      if secret then { known = true; sensitive = true; value = secretOf ctx.at ctx.channel ref; refs = [ ref ]; }
      else { known = r.state == "known"; sensitive = false; value = r.value or null; refs = [ ref ]; }
    else if isSecret x then { known = true; sensitive = true; value = x.value; refs = [ ]; }
    else if isDerived x then
      let rs = map (resolveItem ctx) x.items; known = all (r: r.known) rs; in
      {
        inherit known;
        sensitive = any (r: r.sensitive) rs;
        ephemeral = any (r: r.ephemeral or false) rs;
        refs = concatMap (r: r.refs) rs;
        value = if known then x.fn (map (r: r.value) rs) else null;
      }
    else { known = true; sensitive = false; value = x; refs = [ ]; };
in
{
  inherit isRef isDerived isSecret isDeferred isPlaceholder mkRef mkDerived mkSecret mkSecretOf str compute lookup
    resolveItem refInput showRef channel;
}

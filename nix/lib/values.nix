# Deferred values: references to provider outputs, values Nix derives from them
# (str, compute), and their resolution against the outputs ledger.
#
# A reference or derived value is inert data until toIR meets it while walking a
# config tree. There it is resolved against the ledger: a concrete value when every
# output it needs is known, otherwise an IR marker (__ref, __sensitiveRef,
# __derived). Using one as a plain string in Nix (interpolation, ++) fails with a
# message pointing at lib.str / lib.compute.
{ names }:
let
  inherit (builtins)
    all any attrNames attrValues concatMap concatStringsSep elemAt genList head isAttrs
    isBool isFloat isFunction isInt isList isString length listToAttrs throw toJSON;

  isRef = x: isAttrs x && (x._type or null) == "nivis:ref";
  isDerived = x: isAttrs x && (x._type or null) == "nivis:derived";
  isDeferred = x: isRef x || isDerived x;

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
  # ctx = { outputs; checkRef = ref -> ref (throws if undeclared); at = string; }
  # -> { known = bool; value (when known); refs = [ref] }
  resolveItem = ctx: x:
    if isRef x then
      let
        ref = ctx.checkRef x;
        r = lookup ctx.outputs ref;
        secret = r.state == "sensitive" || (r.state == "known" && containsPlaceholder r.value);
      in
      if secret then throw
        "nivis: ${ctx.at}: deriving a Nix value from sensitive output ${showRef ref} is not supported: pass the reference directly"
      else { known = r.state == "known"; value = r.value or null; refs = [ ref ]; }
    else if isDerived x then
      let rs = map (resolveItem ctx) x.items; known = all (r: r.known) rs; in
      { inherit known; refs = concatMap (r: r.refs) rs; value = if known then x.fn (map (r: r.value) rs) else null; }
    else { known = true; value = x; refs = [ ]; };
in
{
  inherit isRef isDerived isDeferred isPlaceholder mkRef str compute lookup resolveItem refInput showRef;
}

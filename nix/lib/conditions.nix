# Conditions: a resource's lifecycle.precondition / lifecycle.postcondition and the plan's
# checks (lib.check), turned into IR by toIR. Owns deciding, for each condition, whether it
# holds, fails or cannot be known yet; not the walk that resolves values against the ledger
# (ir.nix passes its `walk` in), nor what the executor does with the result.
#
#   lifecycle.precondition = [ { condition = BOOL; message = STR; } ]
#     condition: a bool, or a value computed from outputs (refAttr, lib.compute) that is one.
#     A false one stops the evaluation (nothing is planned) with the message. One not known yet
#     holds the resource back (meta.lifecycle.preconditionPending, a __derived marker) until
#     the outputs it reads are in the ledger.
#   lifecycle.postcondition = [ { condition = self: BOOL; message = STR; } ]
#     condition: a function of the resource's recorded outputs (the ledger's entry; sensitive
#     attributes are placeholders, not their values). Known once the object is recorded, so
#     checked in the evaluation after its apply; the IR's `conditions` carries the result and
#     the executor fails the apply on a false one (a plan warns).
#   lib.check { name; "assert" = BOOL; message; }    in toIR's checks: "assert" (quoted: a Nix
#     keyword; or `condition`) is a bool or a value computed from outputs; the executor warns
#     on a false one after the fixpoint.
{ names }:
let
  inherit (builtins)
    attrNames concatMap elem filter genList head isAttrs isBool isFunction isList isString
    length listToAttrs throw;

  isCheck = x: isAttrs x && (x._type or null) == "nivis:check";

  # lib.check { name; "assert" = BOOL; message; } (`assert` is a Nix keyword, so it is quoted;
  # `condition` is the same field unquoted, as in pre- and postconditions).
  check = args:
    let
      unknown = if isAttrs args then filter (k: !elem k [ "name" "assert" "condition" "message" ]) (attrNames args) else [ ];
      label = "lib.check ${if isString (args.name or null) then args.name else "?"}";
    in
    if !isAttrs args then throw "nivis: lib.check expects { name; \"assert\" = BOOL; message; }, got ${names.describe args}"
    else if unknown != [ ] then throw "nivis: ${label}: unknown field '${head unknown}' (expected name, \"assert\" (or condition), message)"
    else if !(names.isConsumerId (args.name or null)) then
      throw "nivis: lib.check: 'name' must be a string of letters, digits, '_', '-' and '.', got ${names.describe (args.name or null)}"
    else if args ? "assert" && args ? condition then throw "nivis: ${label}: give \"assert\" or condition, not both"
    else if !(args ? "assert" || args ? condition) then
      throw "nivis: ${label}: \"assert\" is missing (a bool, or a value computed from outputs; quoted: assert is a Nix keyword)"
    else if !isString (args.message or null) then throw "nivis: ${label}: 'message' must be a string"
    else { _type = "nivis:check"; inherit (args) name message; condition = args."assert" or args.condition; };

  # What a walked condition value says: { known = true; value = BOOL; } or
  # { known = false; inputs = [ "<id>.<attr>" ... ]; }.
  verdict = what: v:
    let
      markerOf = m: [ "${m.resource}.${head m.path}" ];
    in
    if isBool v then { known = true; value = v; }
    else if isAttrs v && v ? __sensitive then verdict what v.__sensitive.value
    else if isAttrs v && v ? __ephemeral then verdict what v.__ephemeral.value
    else if isAttrs v && v ? __derived then { known = false; inputs = v.__derived.inputs; }
    else if isAttrs v && v ? __ref then { known = false; inputs = markerOf v.__ref; }
    else if isAttrs v && v ? __sensitiveRef then
      throw "nivis: ${what} reads the sensitive output ${head (markerOf v.__sensitiveRef)} directly; compute the condition with lib.compute, which reads secrets"
    else throw "nivis: ${what} must be a bool (or a value computed from outputs that is one), got ${names.describe v}";

  # The entries of a condition list, checked: each { condition; message; }.
  entries = owner: field: wantFunction: xs:
    if !isList xs then throw "nivis: ${owner}: lifecycle.${field} must be a list of { condition; message; }"
    else genList (i:
      let c = builtins.elemAt xs i; at = "${owner}: lifecycle.${field}[${toString i}]"; in
      if !isAttrs c || attrNames c != [ "condition" "message" ] then
        throw "nivis: ${at} must be { condition = ${if wantFunction then "self: BOOL" else "BOOL"}; message = STR; }, got ${names.describe c}"
      else if !isString c.message then throw "nivis: ${at}.message must be a string"
      else if wantFunction && !isFunction c.condition then
        throw "nivis: ${at}.condition must be a function of the resource's outputs (self: BOOL)"
      else c) (length xs);

  # Preconditions of node `n` (id `id`): throws on a false one; otherwise
  # { pending = [ input ... ]; edges = [ { from; via; reads; } ... ]; }.
  # `walkAt i value` walks one condition (with the context of the node).
  preconditions = owner: walkAt: xs:
    let
      cs = entries owner "precondition" false xs;
      results = genList (i:
        let
          c = builtins.elemAt cs i;
          w = walkAt i c.condition;
          r = verdict "${owner}: lifecycle.precondition[${toString i}].condition" w.v;
        in
        if r.known && !r.value then throw "nivis: ${owner}: precondition failed: ${c.message}"
        else {
          pending = if r.known then [ ] else r.inputs;
          # An edge reading a plain reference carries `ref` for the executor to put a marker
          # back into the config; a condition is no config, so it says what it `reads`.
          edges = map (e: {
            inherit (e) from;
            via = "lifecycle.precondition[${toString i}]";
            reads = e.reads or (if e ? ref then [ e.ref ] else [ ]);
          }) w.e;
        }) (length cs);
    in
    {
      pending = attrNames (listToAttrs (map (x: { name = x; value = null; }) (concatMap (r: r.pending) results)));
      edges = concatMap (r: r.edges) results;
    };

  # The IR's `conditions` entries for node `id`'s postconditions, against `outputs` (the
  # ledger's outputs): unknown until the object is recorded.
  postconditions = owner: id: outputs: xs:
    let cs = entries owner "postcondition" true xs; in
    genList (i:
      let
        c = builtins.elemAt cs i;
        what = "${owner}: lifecycle.postcondition[${toString i}].condition";
        status =
          if !(outputs ? ${id}) then "unknown"
          else
            let r = verdict what (c.condition outputs.${id}); in
            if !r.known then throw "nivis: ${what} must be a bool computed from the resource's outputs"
            else if r.value then "pass" else "fail";
      in
      { kind = "postcondition"; name = "${id}.postcondition[${toString i}]"; resource = id; inherit (c) message; inherit status; })
      (length cs);

  # The IR's `conditions` entries of toIR's checks; `walkCheck c` walks one check's assert.
  checks = walkCheck: xs:
    let
      cs = map (c: if isCheck c then c else throw "nivis: toIR: checks entries must be made with lib.check, got ${names.describe c}") xs;
      dup = filter (n: length (filter (c: c.name == n) cs) > 1) (map (c: c.name) cs);
    in
    if dup != [ ] then throw "nivis: toIR: two checks are named ${head dup}; check names must be unique"
    else map (c:
      let r = verdict "check ${c.name}: assert" (walkCheck c).v; in
      { kind = "check"; inherit (c) name message; status = if !r.known then "unknown" else if r.value then "pass" else "fail"; })
      cs;

  # lifecycle.replaceTriggeredBy = [ r (r.refAttr "id") (r.ref [ "net" 0 ]) ]: the resource is
  # replaced when r is planned to change (a whole resource) or when the output's value differs
  # from the one recorded at its last apply (DESIGN §103). The executor decides; Nix names the
  # triggers: { ir = [ { resource; path?; } ]; edges = [ { from; via; } ]; }, each trigger
  # planned first. `isManaged id`: whether id is a managed resource of toIR.
  triggers = owner: self: isManaged: xs:
    if !isList xs then
      throw "nivis: ${owner}: lifecycle.replaceTriggeredBy must be a list of resources or their outputs (r or r.refAttr \"id\")"
    else
      let
        one = i: t:
          let
            at = "${owner}: lifecycle.replaceTriggeredBy[${toString i}]";
            kind = if isAttrs t then t._type or null else null;
            id = if kind == "nivis:resource" then t.id else if kind == "nivis:ref" then t.resource else null;
          in
          if id == null then
            throw "nivis: ${at} is ${names.describe t}; give a resource (r) or one of its outputs (r.refAttr \"id\")"
          else if id == self then throw "nivis: ${at} is the resource itself"
          else if !isManaged id then
            throw "nivis: ${at} refers to ${id}, which is not a managed resource in toIR's resources"
          else {
            ir = if kind == "nivis:resource" then { resource = id; } else { resource = id; inherit (t) path; };
            edge = { from = id; via = "lifecycle.replaceTriggeredBy[${toString i}]"; };
          };
        rs = genList (i: one i (builtins.elemAt xs i)) (length xs);
      in
      { ir = map (r: r.ir) rs; edges = map (r: r.edge) rs; };

  lifecycleKeys = [ "preventDestroy" "createBeforeDestroy" "ignoreChanges" "precondition" "postcondition" "replaceTriggeredBy" ];
in
{
  inherit check isCheck preconditions postconditions checks triggers lifecycleKeys;
}

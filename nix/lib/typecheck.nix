# Runtime checks for the constructors `nivis gen` writes (src/codegen/). Builtins only.
#
#   check what spec config    config, once it satisfies spec (else throws "nivis: <what>: ...")
#   construct kind what spec args make nodeArgs
#                             make nodeArgs, once the constructor's own arguments are valid
#
# A spec is generated data describing one block or nested object:
#   { attrs = { <name> = attr; }; blocks = { <name> = block; };   (blocks: optional)
#     names = [ settable names ]; required = [ ... ]; needed = [ blocks with min >= 1 ];
#     dep = "why"; }                                              (dep: deprecated, optional)
#   attr  = { t = type; out = true (computed only); dep = "why"; }   (out, dep: optional)
#   block = { nest = "single"|"group"|"list"|"set"|"map"; min = n; max = n; body = spec; dep = "why"; }
#   type  = "string" | "number" | "bool" | "dynamic" | { list = type; } | { set = type; }
#         | { map = type; } | { tuple = [ type ]; } | { object = { <name> = type; }; opt = [ name ]; }
#         | { nested = "single"|"list"|"set"|"map"; body = spec; }  (protocol 6 nested attributes)
#
# The checks accept what the executor's conversions accept (numbers and bools where a string
# goes, "12" and "true" where a number or bool goes; null means unset), so they reject no config
# the executor would apply (save a set of blocks over its maximum whose elements only become
# equal once references resolve). References, derived values (lib.str, lib.compute) and build
# outputs (lib.drv, derivations) are accepted wherever a value goes.
{ names, values }:
let
  inherit (builtins)
    all attrNames concatStringsSep elem elemAt filter foldl' genList head isAttrs isFunction
    isList isString length match stringLength substring throw trace typeOf;

  fail = what: msg: throw "nivis: ${what}: ${msg}";
  arg = path: "'${names.renderPath path}'";
  indices = xs: genList (i: i) (length xs);

  # null, references, derived values and build outputs fit every slot; a resource fits none.
  pass = what: path: x:
    x == null
    || isAttrs x && (
      if (x._type or null) == "nivis:resource" then
        fail what "argument ${arg path} is the whole resource ${x.id}; use one of its outputs, e.g. (${x.name}.refAttr \"id\")"
      else values.isDeferred x || x ? __build || (x.type or null) == "derivation");

  # An attrset of arguments or map entries (not a string-like set or a provider).
  plain = x: isAttrs x && !(x ? outPath || x ? __toString || (x._type or null) == "nivis:provider");

  numberRe = "[[:space:]]*[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?[[:space:]]*";
  primitive = {
    string = x: let t = typeOf x; in
      t == "string" || t == "int" || t == "float" || t == "bool" || t == "path"
      || (t == "set" && (x ? outPath || x ? __toString));
    number = x: let t = typeOf x; in
      t == "int" || t == "float" || (t == "string" && match numberRe x != null);
    bool = x: typeOf x == "bool" || x == "true" || x == "false";
    dynamic = _: true;
  };

  noun = t:
    if isString t then (if t == "dynamic" then "a value" else "a ${t}")
    else if t ? list then "a list"
    else if t ? set then "a list (a set)"
    else if t ? map then "an attrset (a map)"
    else if t ? tuple then "a list of ${toString (length t.tuple)} elements (a tuple)"
    else if t ? object then "an attrset (an object)"
    else if t.nested == "single" then "an attrset"
    else if t.nested == "map" then "an attrset of attrsets"
    else "a list of attrsets";

  mismatch = what: path: want: x:
    fail what "argument ${arg path} must be ${want}, got ${names.describe x}";

  # Levenshtein distance, byte-wise (argument names are ASCII).
  distance = a: b:
    let
      lb = stringLength b;
      step = prev: i:
        let
          c = substring i 1 a;
          row = genList (j:
            if j == 0 then i + 1
            else
              let
                sub = elemAt prev (j - 1) + (if c == substring (j - 1) 1 b then 0 else 1);
                del = elemAt prev j + 1;
                ins = elemAt row (j - 1) + 1;
                m = if sub < del then sub else del;
              in
              if m < ins then m else ins) (lb + 1);
        in
        builtins.deepSeq row row;
    in
    elemAt (foldl' step (genList (j: j) (lb + 1)) (genList (i: i) (stringLength a))) lb;

  # "; did you mean 'label'?" for a typo (distance < 3, as the executor), else the choices.
  hint = key: candidates:
    let
      best = foldl' (b: c: let d = distance key c; in if d < 3 && (b == null || d < b.d) then { inherit c d; } else b)
        null candidates;
      n = length candidates;
    in
    if best != null then "; did you mean '${best.c}'?"
    else if n == 0 then "; no arguments are expected here"
    else if n <= 12 then "; expected one of: ${concatStringsSep ", " candidates}"
    else " (no close match among ${toString n} arguments)";

  unknown = what: path: key: candidates:
    fail what "unknown argument ${arg (path ++ [ key ])}${hint key candidates}";

  deprecated = what: path: s: ok:
    if s ? dep then
      trace "nivis: warning: ${what}: argument ${arg path} is deprecated${if s.dep == "" then "" else ": ${s.dep}"}" ok
    else ok;

  # A block body or nested object: unknown names first (a typo of a required argument is
  # reported as the typo), then missing ones, then each value given.
  body = what: path: spec: v:
    let
      blocks = spec.blocks or { };
      given = attrNames v;
      stray = filter (k: !(spec.attrs ? ${k} || blocks ? ${k})) given;
      missing = filter (k: (v.${k} or null) == null) (spec.required or [ ]);
      absent = filter (k: (v.${k} or null) == null) (spec.needed or [ ]);
      one = k:
        if spec.attrs ? ${k} then attribute what (path ++ [ k ]) spec.attrs.${k} v.${k}
        else block what (path ++ [ k ]) blocks.${k} v.${k};
    in
    if stray != [ ] then unknown what path (head stray) spec.names
    else if missing != [ ] then fail what "missing required argument ${arg (path ++ [ (head missing) ])}"
    else if absent != [ ] then
      let b = blocks.${head absent}; in
      fail what "missing required block ${arg (path ++ [ (head absent) ])}${
        if b.nest == "single" then "" else " (at least ${toString b.min})"}"
    else all one given;

  attribute = what: path: a: x:
    if x == null then true
    else if a.out or false then
      fail what "${arg path} is computed by the provider (an output); it cannot be set"
    else deprecated what path a (value what path a.t x);

  value = what: path: t: x:
    pass what path x || (
      if isString t then primitive.${t} x || mismatch what path (noun t) x
      else if t ? list || t ? set then
        (isList x || mismatch what path (noun t) x)
        && all (i: value what (path ++ [ i ]) (t.list or t.set) (elemAt x i)) (indices x)
      else if t ? map then
        (plain x || mismatch what path (noun t) x)
        && all (k: value what (path ++ [ k ]) t.map x.${k}) (attrNames x)
      else if t ? tuple then
        (isList x && length x == length t.tuple || mismatch what path (noun t) x)
        && all (i: value what (path ++ [ i ]) (elemAt t.tuple i) (elemAt x i)) (indices x)
      else if t ? object then
        let
          keys = attrNames t.object;
          stray = filter (k: !(t.object ? ${k})) (attrNames x);
          missing = filter (k: !(x ? ${k}) && !elem k (t.opt or [ ])) keys;
        in
        if !plain x then mismatch what path (noun t) x
        else if stray != [ ] then unknown what path (head stray) keys
        else if missing != [ ] then
          fail what "argument ${arg path} lacks attribute '${head missing}' (this object type needs every attribute; null is allowed)"
        else all (k: value what (path ++ [ k ]) t.object.${k} x.${k}) (attrNames x)
      else if t.nested == "single" then (plain x || mismatch what path (noun t) x) && body what path t.body x
      else if t.nested == "map" then (plain x || mismatch what path (noun t) x) && members what path t.body null x
      else (isList x || mismatch what path (noun t) x) && members what path t.body null x);

  # The objects of a list or map of nested objects (self == null) or blocks (self names the
  # block: a null element is an error there).
  members = what: path: spec: self: xs:
    let
      one = p: x:
        if x == null && self != null then fail what "argument ${arg p} must be ${self}, got null"
        else pass what p x || (plain x || fail what "argument ${arg p} must be ${if self == null then "an attrset" else self}, got ${names.describe x}")
          && body what p spec x;
    in
    if isList xs then all (i: one (path ++ [ i ]) (elemAt xs i)) (indices xs)
    else all (k: one (path ++ [ k ]) xs.${k}) (attrNames xs);

  # Set elements count once each (the executor drops later duplicates).
  distinct = xs: length (foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ] xs);

  block = what: path: b: x:
    let
      name = names.renderPath [ (elemAt path (length path - 1)) ];
      self = "a '${name}' block (an attrset)";
      n = if b.nest == "set" then distinct x else length x;
      plural = m: "${toString m} block${if m == 1 then "" else "s"}";
      counted =
        if (b.min or 0) > 0 && n < b.min then fail what "argument ${arg path} needs at least ${plural b.min}, got ${toString n}"
        else if (b.max or 0) > 0 && n > b.max then fail what "argument ${arg path} allows at most ${plural b.max}, got ${toString n}"
        else true;
      ok =
        if b.nest == "single" || b.nest == "group" then
          if isList x then fail what "argument ${arg path} is a single block: give one attrset, not a list"
          else (plain x || mismatch what path self x) && body what path b.body x
        else if b.nest == "map" then
          (plain x || fail what "argument ${arg path} takes '${name}' blocks as an attrset keyed by label, got ${names.describe x}")
          && members what path b.body self x
        else if isList x then members what path b.body self x && counted
        else if plain x then
          fail what "argument ${arg path} takes a list of blocks: wrap the attrset in a list, e.g. ${name} = [ { ... } ]"
        else mismatch what path "a list of '${name}' blocks" x;
    in
    pass what path x || deprecated what path b ok;

  check = what: spec: config:
    builtins.seq
      (if plain config && (config._type or null) == null then body what [ ] spec config
       else fail what "config must be an attrset of arguments, got ${names.describe config}")
      config;

  ctorArgs = {
    resource = [ "name" "config" "provider" "dependsOn" "lifecycle" "overrides" ];
    data = [ "name" "config" "provider" "dependsOn" "overrides" ];
    provider = [ "source" "version" "config" "overrides" ];
  };

  maker = { resource = "mkResource"; data = "mkData"; provider = "mkProvider"; };

  construct = kind: what: spec: args: make: nodeArgs:
    let
      stray = filter (k: !elem k ctorArgs.${kind}) (attrNames args);
      k = head stray;
      ok =
        if stray == [ ] then
          isFunction (args.overrides or (x: x))
          || fail what "overrides must be a function from the arguments for lib.${maker.${kind}} to the ones to use, got ${names.describe args.overrides}"
        else if spec.attrs ? ${k} || (spec.blocks or { }) ? ${k} then
          fail what "'${k}' is an argument of the ${if kind == "data" then "data source" else kind}: pass it inside config = { ${names.renderPath [ k ]} = ...; }"
        else if kind == "data" && k == "lifecycle" then fail what "data sources have no lifecycle"
        else if elem k [ "count" "forEach" "for_each" ] then
          fail what "unknown constructor argument '${k}': expand instances with lib.count or lib.forEach"
        else fail what "unknown constructor argument '${k}'${hint k ctorArgs.${kind}}";
      # A resource or data source keeps the arguments it was called with: `nivis why` names
      # the line where they were written, not this constructor's (see nodes.positions).
      made = if kind == "provider" then make nodeArgs else make nodeArgs // { _site = args; };
    in
    builtins.seq ok (
      if spec ? dep then trace "nivis: warning: ${what} is deprecated${if spec.dep == "" then "" else ": ${spec.dep}"}" made
      else made);
in
{
  inherit check construct;
}

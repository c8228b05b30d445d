# Terraform's functions and operators as Nix, for the code `nivis convert terraform` wrote.
# Builtins only. Each follows Terraform's meaning for the values it takes, and throws
# (never approximates) where Nix cannot compute the same result.
let
  inherit (builtins)
    attrNames attrValues concatLists concatStringsSep elemAt filter genList head isAttrs isBool
    isFloat isInt isList isString listToAttrs match replaceStrings stringLength substring toJSON;
  chars = s: genList (i: substring i 1 s) (stringLength s);
  upperChars = chars "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  lowerChars = chars "abcdefghijklmnopqrstuvwxyz";
  ascii = s: match "[ -~\t\n\r]*" s != null;
  asciiOnly = fn: s:
    if ascii s then s
    else throw "convert: ${fn}() of non-ASCII text is not translated (Terraform counts and cases Unicode characters); write it in Nix";
  keysOf = c: if isAttrs c then attrNames c else genList (i: i) (builtins.length c);
  at = c: k: if isAttrs c then c.${k} else elemAt c k;
in
rec {
  tostring = v:
    if isString v then v
    else if isBool v then (if v then "true" else "false")
    else if isInt v then toString v
    else if isFloat v then toJSON v
    else if v == null then null
    else throw "convert: tostring() takes a string, number or bool";
  tonumber = v: if isString v then builtins.fromJSON v else v;
  tobool = v: if v == "true" then true else if v == "false" then false else v;
  length = v:
    if isList v then builtins.length v
    else if isAttrs v then builtins.length (attrNames v)
    else builtins.stringLength (asciiOnly "length" v);
  lower = s: replaceStrings upperChars lowerChars (asciiOnly "lower" s);
  upper = s: replaceStrings lowerChars upperChars (asciiOnly "upper" s);
  # A set of strings, in Terraform's (lexical) order.
  toset = l: attrNames (listToAttrs (map (x: { name = tostring x; value = null; }) l));
  element = l: i:
    let n = builtins.length l; in
    if n == 0 then throw "convert: element() of an empty list"
    else elemAt l (i - n * (i / n));
  lookup = m: k:
    if m ? ${k} then m.${k}
    else throw "convert: lookup(): the map has no key ${toJSON k} and no default was given";
  replace = s: from: to:
    let n = stringLength from; in
    if n > 1 && substring 0 1 from == "/" && substring (n - 1) 1 from == "/" then
      throw "convert: replace() with a regular expression (${from}) is not translated; write it in Nix"
    else replaceStrings [ from ] [ to ] s;
  join = sep: lists: concatStringsSep sep (map tostring (concatLists lists));
  coalesce = vs:
    let found = filter (v: v != null && v != "") vs; in
    if found == [ ] then throw "convert: coalesce(): every argument is null or \"\""
    else head found;
  # Terraform's `/` is division of real numbers; `%` keeps the dividend's sign.
  div = a: b: let q = a / b; in if isInt a && isInt b && q * b != a then (a + 0.0) / b else q;
  mod = a: b: a - b * (a / b);
  index = c: k: if isList c then elemAt c k else c.${k};
  splat = v: if v == null then [ ] else if isList v then v else [ v ];
  # [for k, v in c : value if cond] and {for k, v in c : key => value if cond}.
  forList = c: value: cond:
    map (k: value k (at c k)) (filter (k: cond k (at c k)) (keysOf c));
  forObject = c: key: value: cond:
    listToAttrs (map (k: { name = key k (at c k); value = value k (at c k); })
      (filter (k: cond k (at c k)) (keysOf c)));
  # The nodes of a module's blocks: { TYPE = { NAME = node or [ node ... ]; }; } -> [ node ... ].
  nodes = blocks:
    concatLists (map (ty: concatLists (map (n: let x = blocks.${ty}.${n}; in if isList x then x else [ x ])
      (attrNames blocks.${ty}))) (attrNames blocks));
  # A module's for_each: a map as it is, a set of strings as a map of each to itself.
  eachOf = xs: if isList xs then listToAttrs (map (k: { name = tostring k; value = k; }) xs) else xs;
  # depends_on: nodes, lists of nodes (count / for_each) and modules' resources, flattened.
  dependsOn = xs: concatLists (map (x: if isList x then x else [ x ]) xs);
}

# Identifier rules and attribute-path rendering shared by the whole library.
# The patterns mirror docs/ir-schema.json; keep them in step.
let
  inherit (builtins)
    concatStringsSep elemAt genList isInt isString length match toJSON typeOf;

  matches = re: s: isString s && match re s != null;

  identRe = "[A-Za-z_][A-Za-z0-9_-]*";
  providerRe = "[A-Za-z0-9][A-Za-z0-9_./-]*";
  attrRe = "[A-Za-z0-9_-]+";
  keyRe = "[A-Za-z0-9_-]+";
  consumerRe = "[A-Za-z0-9_][A-Za-z0-9_.-]*";
  # A rendered attribute path (see renderPath). builtins.match speaks POSIX ERE:
  # no (?:...), and brackets are matched as [[] and []] rather than escaped.
  quotedRe = ''[[]"([^"\\]|\\.)*"[]]'';
  pathRe = "(${identRe}|${quotedRe})([.]${identRe}|[[](0|[1-9][0-9]*)[]]|${quotedRe})*";

  # Render path steps the way the IR writes attribute paths:
  #   [ "disk" 0 "size" ] -> disk[0].size      [ "tags" "a.b" ] -> tags["a.b"]
  renderPath = steps:
    concatStringsSep "" (genList (i:
      let s = elemAt steps i; in
      if isInt s then "[${toString s}]"
      else if matches identRe s then (if i == 0 then s else ".${s}")
      else "[${toJSON s}]") (length steps));

  # "config" + [ "label" ] -> config.label ; "config" + [ "a b" ] -> config["a b"]
  showAt = root: steps:
    if steps == [ ] then root
    else if matches identRe (elemAt steps 0) then "${root}.${renderPath steps}"
    else "${root}${renderPath steps}";

  describe = v:
    let t = typeOf v; in
    if t == "string" then "the string ${toJSON v}"
    else if t == "set" then "a set"
    else if t == "lambda" then "a function"
    else if t == "null" then "null"
    else if t == "int" then "an integer"
    else "a ${t}";
in
{
  inherit matches identRe providerRe attrRe keyRe consumerRe pathRe renderPath showAt describe;
  isIdent = matches identRe;
  isProviderId = matches providerRe;
  isAttrName = matches attrRe;
  isInstanceKey = matches keyRe;
  isConsumerId = matches consumerRe;
  isAttrPath = s: s == "*" || matches pathRe s;
}

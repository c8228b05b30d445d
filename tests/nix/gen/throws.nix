# Misuses of the generated constructors: name -> { expr; expect; }. run.py evaluates each
# expr (deeply) on its own and requires `nix eval` to fail with `expect` in stderr.
{ root, gen }:
let
  t = import ./lib.nix { inherit root gen; };
  inherit (t) lib alpha kinds;
  A = alpha.resources.alpha_token { name = "A"; };
  token = config: alpha.resources.alpha_token { name = "T"; inherit config; };
  lookup = config: alpha.data.alpha_lookup { name = "L"; inherit config; };
  minimal = { s = "s"; single = { name = "one"; }; list = [ { port = 1; } ]; };
  thing = config: kinds.resources.kinds_thing { name = "K"; config = minimal // config; };
  bare = config: kinds.resources.kinds_thing { name = "K"; inherit config; };
  # Through toIR, as a user would meet them.
  plan = r: lib.toIR { providers.alpha = lib.mkProvider { source = "provider-alpha"; }; resources = [ r ]; };
in
{
  missingRequired = { expr = lookup { }; expect = "nivis: alpha_lookup: missing required argument 'key'"; };
  requiredNull = { expr = lookup { key = null; }; expect = "alpha_lookup: missing required argument 'key'"; };
  computedGiven = { expr = plan (token { id = "x"; }); expect = "nivis: alpha_token: 'id' is computed by the provider (an output); it cannot be set"; };
  computedSensitiveGiven = { expr = token { secret = "x"; }; expect = "alpha_token: 'secret' is computed by the provider (an output); it cannot be set"; };
  computedInData = { expr = lookup { key = "k"; result = "r"; }; expect = "alpha_lookup: 'result' is computed by the provider"; };
  unknownTypo = { expr = plan (token { lable = "x"; }); expect = "nivis: alpha_token: unknown argument 'lable'; did you mean 'label'?"; };
  unknownTypoOfRequired = { expr = lookup { kye = "k"; }; expect = "alpha_lookup: unknown argument 'kye'; did you mean 'key'?"; };
  unknownFar = { expr = token { zzzzzz = 1; }; expect = "alpha_token: unknown argument 'zzzzzz'; expected one of: keeper, label, rules"; };
  nestedTypo = { expr = token { rules = [ { port = 1; prot = "tcp"; } ]; }; expect = "alpha_token: unknown argument 'rules[0].prot'; did you mean 'proto'?"; };
  nestedMissing = { expr = token { rules = [ { port = 1; } { proto = "tcp"; } ]; }; expect = "alpha_token: missing required argument 'rules[1].port'"; };
  nestedType = { expr = token { rules = [ { port = 1; } { port = "http"; } ]; }; expect = "alpha_token: argument 'rules[1].port' must be a number, got the string \"http\""; };
  nestedNotList = { expr = token { rules = { port = 1; }; }; expect = "alpha_token: argument 'rules' must be a list of attrsets, got a set"; };
  nestedElementNotSet = { expr = token { rules = [ 80 ]; }; expect = "alpha_token: argument 'rules[0]' must be an attrset, got an integer"; };
  stringGotList = { expr = token { label = [ "a" ]; }; expect = "alpha_token: argument 'label' must be a string, got a list"; };
  stringGotSet = { expr = token { label = { a = 1; }; }; expect = "alpha_token: argument 'label' must be a string, got a set"; };
  stringGotFunction = { expr = token { label = x: x; }; expect = "alpha_token: argument 'label' must be a string, got a function"; };
  wholeResource = { expr = token { label = A; }; expect = "alpha_token: argument 'label' is the whole resource alpha.alpha_token.A; use one of its outputs, e.g. (A.refAttr \"id\")"; };
  configNotSet = { expr = token "x"; expect = "alpha_token: config must be an attrset of arguments, got the string \"x\""; };
  configIsRef = { expr = token (A.refAttr "x"); expect = "alpha_token: config must be an attrset of arguments, got a set"; };
  flatArgument = { expr = alpha.resources.alpha_token { name = "T"; label = "x"; }; expect = "alpha_token: 'label' is an argument of the resource: pass it inside config = { label = ...; }"; };
  constructorTypo = { expr = alpha.resources.alpha_token { name = "T"; dependOn = [ ]; }; expect = "alpha_token: unknown constructor argument 'dependOn'; did you mean 'dependsOn'?"; };
  constructorCount = { expr = alpha.resources.alpha_token { name = "T"; count = 2; }; expect = "alpha_token: unknown constructor argument 'count': expand instances with lib.count or lib.forEach"; };
  dataLifecycle = { expr = alpha.data.alpha_lookup { name = "L"; config.key = "k"; lifecycle = { }; }; expect = "alpha_lookup: data sources have no lifecycle"; };
  overridesNotFunction = { expr = alpha.resources.alpha_token { name = "T"; overrides = { }; }; expect = "alpha_token: overrides must be a function"; };
  badName = { expr = alpha.resources.alpha_token { name = "a b"; }; expect = "'name' must start with a letter or '_'"; };
  providerUnknown = { expr = alpha.provider { source = "x"; config.foo = 1; }; expect = "provider alpha: unknown argument 'foo'; no arguments are expected here"; };
  needsTypecheck = { expr = (import (gen + "/alpha") (builtins.removeAttrs t.base [ "typecheck" ])).resources.alpha_token { name = "T"; }; expect = "need a Nivis lib with lib.typecheck"; };

  numberBad = { expr = thing { n = "abc"; }; expect = "kinds_thing: argument 'n' must be a number, got the string \"abc\""; };
  boolBad = { expr = thing { b = "yes"; }; expect = "kinds_thing: argument 'b' must be a bool, got the string \"yes\""; };
  mapNotSet = { expr = thing { tags = [ ]; }; expect = "kinds_thing: argument 'tags' must be an attrset (a map), got a list"; };
  mapElement = { expr = thing { tags.x = [ ]; }; expect = "kinds_thing: argument 'tags.x' must be a string, got a list"; };
  mapOddKey = { expr = thing { tags."a.b" = [ ]; }; expect = "kinds_thing: argument 'tags[\"a.b\"]' must be a string, got a list"; };
  listElement = { expr = thing { ports = [ 1 "x" ]; }; expect = "kinds_thing: argument 'ports[1]' must be a number, got the string \"x\""; };
  listNotList = { expr = thing { ports = 1; }; expect = "kinds_thing: argument 'ports' must be a list, got an integer"; };
  setNotList = { expr = thing { zones = "a"; }; expect = "kinds_thing: argument 'zones' must be a list (a set), got the string \"a\""; };
  tupleLength = { expr = thing { pair = [ "a" ]; }; expect = "kinds_thing: argument 'pair' must be a list of 2 elements (a tuple), got a list"; };
  tupleElement = { expr = thing { pair = [ "a" "b" ]; }; expect = "kinds_thing: argument 'pair[1]' must be a number, got the string \"b\""; };
  objectStray = { expr = thing { obj = { a = "x"; c = 1; }; }; expect = "kinds_thing: unknown argument 'obj.c'; did you mean 'a'?"; };
  objectMissing = { expr = thing { obj = { b = 1; }; }; expect = "kinds_thing: argument 'obj' lacks attribute 'a'"; };
  objectNotSet = { expr = thing { obj = "x"; }; expect = "kinds_thing: argument 'obj' must be an attrset (an object), got the string \"x\""; };
  deep = { expr = thing { matrix = [ { k = [ true "x" ]; } ]; }; expect = "kinds_thing: argument 'matrix[0].k[1]' must be a bool, got the string \"x\""; };
  nestedSingleNotSet = { expr = thing { one = [ ]; }; expect = "kinds_thing: argument 'one' must be an attrset, got a list"; };
  nestedSingleComputed = { expr = thing { one = { x = "a"; y = "b"; }; }; expect = "kinds_thing: 'one.y' is computed by the provider (an output); it cannot be set"; };
  nestedMapValue = { expr = thing { nmap.k = { v = "z"; }; }; expect = "kinds_thing: argument 'nmap.k.v' must be a number, got the string \"z\""; };
  nestedMapNotSet = { expr = thing { nmap = [ ]; }; expect = "kinds_thing: argument 'nmap' must be an attrset of attrsets, got a list"; };
  nestedSetMissing = { expr = thing { nset = [ { } ]; }; expect = "kinds_thing: missing required argument 'nset[0].v'"; };
  keywordName = { expr = thing { "if" = [ ]; }; expect = "kinds_thing: argument 'if' must be a string, got a list"; };
  spacedName = { expr = thing { "a b" = [ ]; }; expect = "kinds_thing: argument '[\"a b\"]' must be a string, got a list"; };
  missingSingleBlock = { expr = bare { s = "s"; list = [ { port = 1; } ]; }; expect = "kinds_thing: missing required block 'single'"; };
  missingListBlock = { expr = bare { s = "s"; single = { name = "x"; }; }; expect = "kinds_thing: missing required block 'list' (at least 1)"; };
  emptyListBlock = { expr = thing { list = [ ]; }; expect = "kinds_thing: argument 'list' needs at least 1 block, got 0"; };
  tooManyListBlocks = { expr = thing { list = [ { port = 1; } { port = 2; } { port = 3; } ]; }; expect = "kinds_thing: argument 'list' allows at most 2 blocks, got 3"; };
  tooManySetBlocks = { expr = thing { set = [ { x = "a"; } { x = "b"; } ]; }; expect = "kinds_thing: argument 'set' allows at most 1 block, got 2"; };
  singleBlockList = { expr = thing { single = [ { name = "a"; } ]; }; expect = "kinds_thing: argument 'single' is a single block: give one attrset, not a list"; };
  singleBlockNotSet = { expr = thing { single = "a"; }; expect = "kinds_thing: argument 'single' must be a 'single' block (an attrset), got the string \"a\""; };
  singleBlockMissingArg = { expr = thing { single = { }; }; expect = "kinds_thing: missing required argument 'single.name'"; };
  listBlockSet = { expr = thing { list = { port = 1; }; }; expect = "kinds_thing: argument 'list' takes a list of blocks: wrap the attrset in a list, e.g. list = [ { ... } ]"; };
  listBlockNull = { expr = thing { list = [ null ]; }; expect = "kinds_thing: argument 'list[0]' must be a 'list' block (an attrset), got null"; };
  listBlockResource = { expr = thing { list = [ A ]; }; expect = "kinds_thing: argument 'list[0]' is the whole resource alpha.alpha_token.A"; };
  innerBlockTypo = { expr = thing { list = [ { port = 1; inner = { w = "x"; }; } ]; }; expect = "kinds_thing: unknown argument 'list[0].inner.w'; did you mean 'v'?"; };
  innerBlockType = { expr = thing { list = [ { port = 1; inner = { v = [ ]; }; } ]; }; expect = "kinds_thing: argument 'list[0].inner.v' must be a string, got a list"; };
  mapBlockList = { expr = thing { map = [ ]; }; expect = "kinds_thing: argument 'map' takes 'map' blocks as an attrset keyed by label, got a list"; };
  mapBlockValue = { expr = thing { map.a = 1; }; expect = "kinds_thing: argument 'map.a' must be a 'map' block (an attrset), got an integer"; };
  groupTypo = { expr = thing { group.flg = true; }; expect = "kinds_thing: unknown argument 'group.flg'; did you mean 'flag'?"; };
  computedInKinds = { expr = thing { id = "x"; }; expect = "kinds_thing: 'id' is computed by the provider (an output); it cannot be set"; };
  dataNoArguments = { expr = kinds.data.kinds_info { name = "I"; config.x = 1; }; expect = "kinds_info: unknown argument 'x'; no arguments are expected here"; };
  dataComputed = { expr = kinds.data.kinds_info { name = "I"; config.all = 1; }; expect = "kinds_info: 'all' is computed by the provider"; };
  oddTypeName = { expr = (kinds.resources."kinds weird/name" { name = "W"; }).id; expect = "'type' must be a resource type name"; };
  manyCandidates = { expr = thing { qqqqqqq = 1; }; expect = "kinds_thing: unknown argument 'qqqqqqq' (no close match among 25 arguments)"; };
}

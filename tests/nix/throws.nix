# Evaluation errors the library must raise: name -> { expr; expect; }.
# run.py evaluates each expr on its own and checks that `nix eval` fails with
# stderr containing `expect`.
{ lib }:
let
  inherit (lib) mkProvider mkResource mkData str compute count forEach toIR vars;
  providers.alpha = mkProvider { source = "provider-alpha"; };
  A = mkResource { provider = "alpha"; type = "alpha_token"; name = "A"; };
  res = name: config: mkResource { provider = "alpha"; type = "alpha_token"; inherit name config; };
  ledger.outputs."alpha.alpha_token.A" = {
    value = "v";
    password = { __sensitiveRef = { resource = "alpha.alpha_token.A"; path = [ "password" ]; }; };
    nested = { inner = { __sensitiveRef = { resource = "alpha.alpha_token.A"; path = [ "nested" ]; }; }; };
  };
  plan = resources: toIR { inherit providers resources ledger; };
  # The same ledger with Nivis's private channel holding A's secrets.
  channelLedger = ledger // {
    secretsFile = builtins.toFile "channel.json" (builtins.toJSON {
      outputs."alpha.alpha_token.A" = { password = "pw"; nested.inner = "in"; };
      vars.token = "tok";
    });
  };
  secretDecls = { token = { type = "string"; sensitive = true; }; count = { type = "number"; sensitive = true; }; };
in
{
  checksGoldenDiffers = {
    expr = (lib.checks { plan = ledger: plan [ A ]; golden = builtins.toFile "ir.json" "{}"; }).nivis-plan-golden.drvPath;
    expect = "the plan's IR differs from the snapshot";
  };
  checksUndeclaredEdge = {
    expr = (lib.checks { plan = _: { schemaVersion = 1; providers = { }; resources = [ ]; edges = [ { from = "x.y.z"; to = "x.y.w"; via = "a"; } ]; }; }).nivis-plan.drvPath;
    expect = "an edge of x.y.w reads x.y.z, which the plan does not declare";
  };
  providerKindUnknown = {
    expr = mkProvider { source = "x"; kind = "terraform"; };
    expect = "mkProvider x: 'kind' must be \"tfplugin\" (the default) or \"nixops4\", got the string \"terraform\"";
  };
  nixops4ProviderVersion = {
    expr = mkProvider { source = "x"; kind = "nixops4"; version = "1.0"; };
    expect = "mkProvider x: a nixops4 provider has no version";
  };
  nixops4ProviderConfig = {
    expr = mkProvider { source = "x"; kind = "nixops4"; config.region = "eu"; };
    expect = "mkProvider x: a nixops4 provider takes no configuration (protocol v0 has none)";
  };
  statelessTypesOnTfplugin = {
    expr = mkProvider { source = "x"; statelessTypes = [ "file" ]; };
    expect = "mkProvider x: 'statelessTypes' is only for kind = \"nixops4\"";
  };
  statelessTypesMalformed = {
    expr = mkProvider { source = "x"; kind = "nixops4"; statelessTypes = "file"; };
    expect = "mkProvider x: 'statelessTypes' must be a list of resource type names";
  };
  dataOnNixops4Provider = {
    expr = toIR {
      providers.local = mkProvider { source = "x"; kind = "nixops4"; };
      data = [ (mkData { provider = "local"; type = "memo"; name = "m"; }) ];
    };
    expect = "data source data.local.memo.m: provider 'local' is of kind nixops4, which has no data sources";
  };
  duplicateResource = {
    expr = plan [ A (res "B" { }) A ];
    expect = "duplicate resource id alpha.alpha_token.A";
  };
  duplicateAcrossDataAndResources = {
    expr = toIR {
      providers."data.alpha" = mkProvider { source = "x"; };
      providers.alpha = mkProvider { source = "x"; };
      resources = [ (mkResource { provider = "data.alpha"; type = "t"; name = "n"; }) ];
      data = [ (mkData { provider = "alpha"; type = "t"; name = "n"; }) ];
    };
    expect = "duplicate resource id data.alpha.t.n";
  };
  duplicateForEachInstance = {
    expr = plan [ (forEach [ "a" ] (k: v: res "web" { })) (res "web__a" { }) ];
    expect = "duplicate resource id alpha.alpha_token.web__a";
  };
  deriveFromSensitiveWithoutChannel = {
    expr = plan [ A (res "C" { label = str [ "pw:" (A.refAttr "password") ]; }) ];
    expect = "resource alpha.alpha_token.C: config.label: alpha.alpha_token.A.password is sensitive and only Nivis can give Nix its value";
  };
  computeFromNestedSensitiveWithoutChannel = {
    expr = plan [ A (res "C" { x = compute (A.refAttr "nested") (n: n); }) ];
    expect = "config.x: alpha.alpha_token.A.nested is sensitive and only Nivis can give Nix its value";
  };
  deriveFromSensitiveInConsumerWithoutChannel = {
    expr = toIR { inherit providers ledger; resources = [ A ]; consumers.c = str [ (A.refAttr "password") ]; };
    expect = "consumer c: value: alpha.alpha_token.A.password is sensitive";
  };
  secretIntoDerivation = {
    expr = toIR {
      inherit providers; ledger = channelLedger; resources = [ A (res "C" {
        label = compute (A.refAttr "password") (pw: derivation { name = "leak"; system = "x"; builder = "/bin/sh"; PW = pw; });
      }) ];
    };
    expect = "resource alpha.alpha_token.C: config.label is a derivation (or a build output) computed from a secret";
  };
  secretStringWithStoreContext = {
    expr = toIR {
      inherit providers; ledger = channelLedger; resources = [ A (res "C" {
        label = str [ (A.refAttr "password") (builtins.toFile "x" "y") ];
      }) ];
    };
    expect = "config.label was computed from a secret but refers to store paths";
  };
  sensitiveVariableAsPlainString = {
    expr = "x-${(vars channelLedger secretDecls).token}";
    expect = "variable 'token' is sensitive: pass it on as it is, or build values from it with lib.str";
  };
  sensitiveVariableOfTheWrongTypeHidesItsValue = {
    expr = vars { vars.count = "s3cr3t-value"; } secretDecls;
    expect = "variable 'count' must be a number, got a string (value hidden: the variable is sensitive)";
  };
  refToUndeclared = {
    expr = plan [ (res "C" { label = A.refAttr "value"; }) ];
    expect = "resource alpha.alpha_token.C: config.label refers to alpha.alpha_token.A, which is not in toIR's resources or data";
  };
  derivedRefToUndeclared = {
    expr = plan [ (res "C" { l = [ (str [ (A.refAttr "value") ]) ]; }) ];
    expect = "config.l[0] refers to alpha.alpha_token.A, which is not in toIR's resources or data";
  };
  dependsOnUndeclared = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; dependsOn = [ "alpha.t.missing" ]; }) ];
    expect = "dependsOn entry alpha.t.missing is not in toIR's resources or data";
  };
  undeclaredProvider = {
    expr = plan [ (mkResource { provider = "gamma"; type = "t"; name = "n"; }) ];
    expect = "resource gamma.t.n: provider 'gamma' is not declared in toIR's providers";
  };
  reservedKey = {
    expr = plan [ (res "C" { tags.__ref = "x"; }) ];
    expect = "config.tags.__ref uses a reserved name";
  };
  functionInConfig = {
    expr = plan [ (res "C" { f = x: x; }) ];
    expect = "resource alpha.alpha_token.C: config.f is a function";
  };
  resourceAsValue = {
    expr = plan [ A (res "C" { peer = A; }) ];
    expect = "config.peer is the whole resource alpha.alpha_token.A";
  };
  interpolatedRef = {
    expr = plan [ A (res "C" { label = "x-${A.refAttr "value"}"; }) ];
    expect = "the output alpha.alpha_token.A.value is not known while Nix evaluates";
  };
  interpolatedDerived = {
    expr = plan [ A (res "C" { label = "x-${str [ (A.refAttr "id") ]}"; }) ];
    expect = "cannot be used as a plain Nix string; nest it in lib.str";
  };
  strNullPart = {
    expr = plan [ A (res "C" { label = str [ "x" null ]; }) ];
    expect = "lib.str: part 1 is null";
  };
  strWholeResource = {
    expr = str [ "x" A ];
    expect = "lib.str: part 1 is the whole resource alpha.alpha_token.A; use one of its outputs, e.g. (A.refAttr \"id\")";
  };
  computeWholeResource = {
    expr = compute A (a: a);
    expect = "lib.compute: the inputs are the whole resource alpha.alpha_token.A";
  };
  strListPart = {
    expr = str [ "x" [ 1 ] ];
    expect = "lib.str: part 1 is a list; turn it into a string with lib.compute first";
  };
  refBadPath = {
    expr = A.ref [ "net" (-1) ];
    expect = "alpha.alpha_token.A.ref: path element 1 is an integer; elements are attribute names (strings) or list indices (integers >= 0)";
  };
  refEmptyPath = {
    expr = A.ref [ ];
    expect = "alpha.alpha_token.A.ref expects a non-empty list path";
  };
  refAttrBadName = {
    expr = A.refAttr "a.b";
    expect = "alpha.alpha_token.A.refAttr expects an output attribute name";
  };
  countInMkResource = {
    expr = (mkResource { provider = "alpha"; type = "t"; name = "n"; count = 2; }).id;
    expect = "mkResource alpha.t.n: unknown argument 'count'; expand instances with lib.count or lib.forEach";
  };
  lifecycleOnData = {
    expr = (mkData { provider = "alpha"; type = "t"; name = "n"; lifecycle.preventDestroy = true; }).id;
    expect = "mkData alpha.t.n: unknown argument 'lifecycle'; data sources have no lifecycle";
  };
  badName = {
    expr = (mkResource { provider = "alpha"; type = "t"; name = "a.b"; }).id;
    expect = "mkResource alpha.t.a.b: 'name' must start with a letter";
  };
  forEachBadKey = {
    expr = map (r: r.id) (forEach [ "a.b" ] (k: v: res "web" { }));
    expect = "lib.forEach: key \"a.b\" of alpha.alpha_token.web cannot be part of a resource id";
  };
  forEachNotAResource = {
    expr = forEach [ "a" ] (k: v: { });
    expect = "lib.forEach: the function must return one resource made with mkResource or mkData (key a)";
  };
  countNegative = {
    expr = count (-1) (i: A);
    expect = "lib.count expects a non-negative integer";
  };
  ephemeralDependsOn = {
    expr = lib.mkEphemeral { provider = "alpha"; type = "t"; name = "n"; dependsOn = [ A ]; };
    expect = "mkEphemeral alpha.t.n: unknown argument 'dependsOn'; an ephemeral resource is opened when its config is known";
  };
  ephemeralInResources = {
    expr = plan [ (lib.mkEphemeral { provider = "alpha"; type = "t"; name = "n"; }) ];
    expect = "toIR: ephemeral.alpha.t.n is an ephemeral resource; list it in ephemeral";
  };
  dataInResources = {
    expr = plan [ (mkData { provider = "alpha"; type = "t"; name = "n"; }) ];
    expect = "toIR: data.alpha.t.n is a data source; list it in data";
  };
  notAResource = {
    expr = plan [ A { id = "x"; } ];
    expect = "toIR: resources[1] is a set, not a resource made with mkResource";
  };
  badIgnoreChanges = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.ignoreChanges = [ "tags..x" ]; }) ];
    expect = "resource alpha.t.n: lifecycle.ignoreChanges entry \"tags..x\" is not an attribute path";
  };
  badLifecycleField = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.prevent_destroy = true; }) ];
    expect = "unknown lifecycle field 'prevent_destroy'";
  };
  varMissing = {
    expr = vars { } { region = { type = "string"; }; };
    expect = "variable 'region' has no value: set it with --var region=VALUE";
  };
  varMissingInToIR = {
    expr = toIR { inherit providers; variables.region = { }; };
    expect = "variable 'region' has no value: set it with --var region=VALUE";
  };
  varWrongType = {
    expr = vars { vars.port = "80"; } { port = { type = "number"; default = 1; }; };
    expect = "variable 'port' must be a number, got the string \"80\"";
  };
  varBadDefault = {
    expr = vars { } { port = { type = "number"; default = "80"; }; };
    expect = "variable 'port': the default must be a number";
  };
  varUnknownType = {
    expr = vars { } { port = { type = "integer"; }; };
    expect = "variable 'port': type must be one of string, number, bool, list, map, any";
  };
  remoteStateUndeclared = {
    expr = (lib.remoteState { remoteStates.other = { lineage = "l"; serial = 1; outputs = { }; }; } "net").serial;
    expect = "no remote state 'net' in the ledger (the ledger has: other); declare it beside the plan as nivis.remoteStates.net";
  };
  remoteStateSecretAsString = {
    expr = let a = (lib.remoteState { remoteStates.net = { lineage = "l"; serial = 1; outputs."alpha.alpha_token.a".secret = { __sensitiveRef = { resource = "alpha.alpha_token.a"; path = [ "secret" ]; }; }; }; } "net").outputs."alpha.alpha_token.a"; in "x${a.secret}";
    expect = "the output alpha.alpha_token.a.secret of remote state net is sensitive: pass it on as it is";
  };
  remoteStateSecretWithoutChannel = {
    expr = toIR { inherit providers; ledger = { remoteStates.net = { lineage = "l"; serial = 1; outputs."alpha.alpha_token.a".secret = { __sensitiveRef = { resource = "alpha.alpha_token.a"; path = [ "secret" ]; }; }; }; };
      resources = [ (res "C" { label = str [ "x-" (lib.remoteState { remoteStates.net = { lineage = "l"; serial = 1; outputs."alpha.alpha_token.a".secret = { __sensitiveRef = { resource = "alpha.alpha_token.a"; path = [ "secret" ]; }; }; }; } "net").outputs."alpha.alpha_token.a".secret ]; }) ]; };
    expect = "alpha.alpha_token.a.secret is sensitive and only Nivis can give Nix its value";
  };
  removedStillDeclared = {
    expr = toIR { inherit providers ledger; resources = [ A ]; removed = [ (lib.removed { from = A; destroy = false; }) ]; };
    expect = "alpha.alpha_token.A is in removed but still declared";
  };
  removedTwice = {
    expr = toIR { inherit providers ledger; removed = [ (lib.removed { from = "alpha.t.x"; }) (lib.removed { from = "alpha.t.x"; destroy = false; }) ]; };
    expect = "alpha.t.x is in removed twice";
  };
  removedBadFrom = {
    expr = lib.removed { from = "old"; };
    expect = "lib.removed: from must be a resource id such as \"alpha.alpha_token.old\"";
  };
  removedBadDestroy = {
    expr = lib.removed { from = "alpha.t.x"; destroy = "no"; };
    expect = "lib.removed alpha.t.x: destroy must be a bool";
  };
  moduleInstancesDoNotNest = {
    expr = (lib.modules.toIR { ledger = { }; modules = [ {
      options.outer = lib.modules.mkOption { type = lib.modules.types.attrsOf (lib.modules.types.submodule ({ lib, ... }: {
        options.inner = lib.modules.mkOption { type = lib.modules.types.submodule { }; };
      })); };
      config.outer.x.inner = { };
    } ]; }).resources;
    expect = "a module instance (module.outer__x) cannot declare module instances of its own";
  };
  moduleInstanceKeyNotAnAddress = {
    expr = (lib.modules.toIR { ledger = { }; modules = [ {
      options.db = lib.modules.mkOption { type = lib.modules.types.attrsOf (lib.modules.types.submodule { }); };
      config.db."eu.west" = { };
    } ]; }).resources;
    expect = "`eu.west' cannot be part of an address";
  };
  preconditionFails = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.precondition = [ { condition = 1 > 2; message = "one must exceed two"; } ]; }) ];
    expect = "resource alpha.t.n: precondition failed: one must exceed two";
  };
  preconditionFailsOnAnOutput = {
    expr = plan [ A (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.precondition = [
      { condition = compute { v = A.refAttr "value"; } ({ v }: v == "w"); message = "A's value must be w"; } ]; }) ];
    expect = "resource alpha.t.n: precondition failed: A's value must be w";
  };
  preconditionNotABool = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.precondition = [ { condition = "yes"; message = "m"; } ]; }) ];
    expect = "resource alpha.t.n: lifecycle.precondition[0].condition must be a bool (or a value computed from outputs that is one), got the string \"yes\"";
  };
  preconditionMalformed = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.precondition = [ { condition = true; } ]; }) ];
    expect = "resource alpha.t.n: lifecycle.precondition[0] must be { condition = BOOL; message = STR; }";
  };
  replaceTriggerUndeclared = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.replaceTriggeredBy = [ (A.refAttr "id") ]; }) ];
    expect = "resource alpha.t.n: lifecycle.replaceTriggeredBy[0] refers to alpha.alpha_token.A, which is not a managed resource in toIR's resources";
  };
  replaceTriggerDataSource = {
    expr = let D = mkData { provider = "alpha"; type = "t"; name = "d"; }; in
      toIR { inherit providers ledger; data = [ D ]; resources = [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.replaceTriggeredBy = [ A D ]; }) A ]; };
    expect = "resource alpha.t.n: lifecycle.replaceTriggeredBy[1] refers to data.alpha.t.d, which is not a managed resource in toIR's resources";
  };
  replaceTriggerNotAReference = {
    expr = plan [ A (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.replaceTriggeredBy = [ "alpha.alpha_token.A" ]; }) ];
    expect = "resource alpha.t.n: lifecycle.replaceTriggeredBy[0] is the string \"alpha.alpha_token.A\"; give a resource (r) or one of its outputs (r.refAttr \"id\")";
  };
  replaceTriggerNotAList = {
    expr = plan [ A (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.replaceTriggeredBy = A; }) ];
    expect = "resource alpha.t.n: lifecycle.replaceTriggeredBy must be a list of resources or their outputs";
  };
  replaceTriggerItself = {
    expr = plan [ (mkResource { provider = "alpha"; type = "alpha_token"; name = "A"; lifecycle.replaceTriggeredBy = [ A ]; }) ];
    expect = "resource alpha.alpha_token.A: lifecycle.replaceTriggeredBy[0] is the resource itself";
  };
  postconditionNotAFunction = {
    expr = plan [ (mkResource { provider = "alpha"; type = "t"; name = "n"; lifecycle.postcondition = [ { condition = true; message = "m"; } ]; }) ];
    expect = "resource alpha.t.n: lifecycle.postcondition[0].condition must be a function of the resource's outputs (self: BOOL)";
  };
  checkWithoutAssert = {
    expr = lib.check { name = "c"; message = "m"; };
    expect = "lib.check c: \"assert\" is missing";
  };
  checkNamesUnique = {
    expr = toIR { inherit providers ledger; checks = [ (lib.check { name = "c"; condition = true; message = "m"; }) (lib.check { name = "c"; condition = true; message = "m"; }) ]; };
    expect = "two checks are named c";
  };
  checkNotMadeWithLibCheck = {
    expr = toIR { inherit providers ledger; checks = [ { name = "c"; } ]; };
    expect = "checks entries must be made with lib.check";
  };
  varValidationFails = {
    expr = vars { vars.region = "mars"; } { region = { type = "string"; validation = [ { condition = v: builtins.elem v [ "eu" "us" ]; message = "region must be eu or us"; } ]; }; };
    expect = "variable 'region': validation failed: region must be eu or us";
  };
  varValidationFailsInToIR = {
    expr = toIR { inherit providers; variables.size = { type = "number"; default = 0; validation = [ { condition = v: v > 0; message = "size must be positive"; } ]; }; ledger = { }; };
    expect = "variable 'size': validation failed: size must be positive";
  };
  varValidationOfASecretHidesItsValue = {
    # The message is the rule's own: no value (e2e::vocab checks the secret is not printed).
    expr = vars { vars.token = "s3cr3t-value"; } { token = { type = "string"; sensitive = true; validation = [ { condition = v: builtins.stringLength v > 20; message = "token too short"; } ]; }; };
    expect = "variable 'token': validation failed: token too short";
  };
  varValidationNotABool = {
    expr = vars { } { n = { default = 1; validation = [ { condition = v: "yes"; message = "m"; } ]; }; };
    expect = "variable 'n': a validation condition returned string, not a bool (message: m)";
  };
  varValidationMalformed = {
    expr = vars { } { n = { default = 1; validation = [ { condition = true; message = "m"; } ]; }; };
    expect = "variable 'n': each validation rule is { condition = value: BOOL; message = STR; }";
  };
  varValidationNotAList = {
    expr = vars { } { n = { default = 1; validation = { condition = v: true; message = "m"; }; }; };
    expect = "variable 'n': validation must be a list";
  };
  drvBadInput = {
    expr = lib.drv "relative/path";
    expect = "lib.drv expects a derivation or an absolute store path";
  };
  importIdEmpty = {
    expr = (mkResource { provider = "alpha"; type = "alpha_token"; name = "I"; importId = ""; }).id;
    expect = "'importId' must be the provider's id of an existing object";
  };
  importIdOnData = {
    expr = (mkData { provider = "alpha"; type = "alpha_token"; name = "I"; importId = "x"; }).id;
    expect = "unknown argument 'importId'; data sources are read, not imported";
  };
  movedUnknownField = {
    expr = lib.moved { from = "alpha.alpha_token.old"; to = A; by = 1; };
    expect = "lib.moved: unknown field 'by' (expected from, to)";
  };
  movedDataSource = {
    expr = (lib.moved { from = "alpha.alpha_token.old"; to = mkData { provider = "alpha"; type = "alpha_token"; name = "d"; }; }).to;
    expect = "lib.moved: to is the data source data.alpha.alpha_token.d; only managed resources move";
  };
  movedNotMadeWithMoved = {
    expr = toIR { inherit providers; resources = [ A ]; moved = [ { from = "a.b.c"; to = A.id; } ]; };
    expect = "toIR: moved entries must be made with lib.moved";
  };
  badConsumerId = {
    expr = toIR { inherit providers; consumers."bad id" = 1; };
    expect = "consumer id 'bad id' may only contain";
  };
  modulesConflict = {
    expr = (lib.modules.eval { modules = [
      { _file = "one.nix"; options.a = lib.modules.mkOption { type = lib.modules.types.str; }; config.a = "x"; }
      { _file = "two.nix"; a = "y"; }
    ]; }).config.a;
    expect = "The option `a' has conflicting definitions: string \"x\" in one.nix, string \"y\" in two.nix";
  };
  modulesListElementType = {
    expr = (lib.modules.eval { modules = [
      { _file = "l.nix"; options.l = lib.modules.mkOption { type = lib.modules.types.listOf lib.modules.types.int; }; config.l = [ 1 "two" ]; }
    ]; }).config.l;
    expect = "The option `l' defined in l.nix is not a list of an integer: an element is string \"two\", not an integer";
  };
  modulesDeclaredTwice = {
    expr = (lib.modules.eval { modules = [
      { _file = "a.nix"; options.x = lib.modules.mkOption { }; }
      { _file = "b.nix"; options.x = lib.modules.mkOption { }; }
    ]; }).config.x;
    expect = "The option `x' is declared more than once: in a.nix and b.nix";
  };
  policyBadLevel = {
    expr = lib.policy.plan { name = "r"; level = "soft"; check = c: true; };
    expect = "lib.policy.plan r: level must be \"advisory\" or \"mandatory\", not \"soft\"";
  };
  policyBadResult = {
    expr = (import ../../nix/lib/policy.nix).run [ (lib.policy.static { name = "r"; check = r: 1; }) ] { kind = "static"; resources = [ { id = "x"; } ]; changes = [ ]; };
    expect = "policy r: check returned a int for x";
  };
}

# Valid uses of the generated constructors: name -> { ir; checks ? { }; }.
# run.py validates every ir with tests/ir-conformance/check.py and requires every check
# to be true.
{ root, gen }:
let
  t = import ./lib.nix { inherit root gen; };
  inherit (t) lib alpha kinds;
  inherit (lib) str compute drv count forEach toIR;
  testDrv = derivation { name = "image"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; };

  providers = {
    alpha = alpha.provider { source = "provider-alpha"; };
    kinds = kinds.provider { source = "provider-kinds"; config.endpoint = "https://example.test"; };
  };
  plan = resources: data: toIR { inherit providers resources data; };

  A = alpha.resources.alpha_token { name = "A"; config = { label = "a"; rules = [ { port = 80; } { port = 443; proto = "tcp"; } ]; }; };
  token = name: config: alpha.resources.alpha_token { inherit name config; };
  node = ir: id: builtins.head (builtins.filter (n: n.id == id) (ir.resources ++ ir.data));

  # The smallest valid kinds_thing config: its required argument and blocks.
  minimal = { s = "s"; single = { name = "one"; }; list = [ { port = 1; } ]; };
  thing = name: config: kinds.resources.kinds_thing { inherit name config; };
  K = thing "K" minimal;
in
{
  alphaReferences =
    let
      B = token "B" { label = str [ "b-" (A.refAttr "value") ]; keeper = A.refAttr "id"; };
      L = alpha.data.alpha_lookup { name = "L"; config.key = A.refAttr "value"; };
      ir = plan [ A B ] [ L ];
    in
    {
      inherit ir;
      checks = {
        configKept = (node ir "alpha.alpha_token.A").config == { label = "a"; rules = [ { port = 80; } { port = 443; proto = "tcp"; } ]; };
        refKept = (node ir "alpha.alpha_token.B").config.keeper == { __ref = { resource = "alpha.alpha_token.A"; path = [ "id" ]; }; };
        derived = (node ir "alpha.alpha_token.B").config.label == { __derived = { inputs = [ "alpha.alpha_token.A.value" ]; }; };
        dataRef = (node ir "data.alpha.alpha_lookup.L").config.key.__ref.path == [ "value" ];
        providerDefault = (node ir "data.alpha.alpha_lookup.L").provider == "alpha";
      };
    };

  # SDKv2 providers report an argument with an environment default as required when the
  # variable is unset where `nivis gen` ran: the provider constructor must not insist on it.
  providerRequiredFromEnvironment =
    let ir = toIR { providers.kinds = kinds.provider { source = "provider-kinds"; }; resources = [ ]; };
    in { inherit ir; checks.noEndpoint = ir.providers.kinds.config == { }; };

  alphaNullsAreUnset = { ir = plan [ (token "N" { label = null; keeper = null; rules = null; id = null; }) ] [ ]; };

  # The executor converts numbers and bools to strings and numeric strings to numbers.
  alphaConvertible = { ir = plan [ (token "C" { label = 12; keeper = true; rules = [ { port = "443"; proto = 1.5; } { port = " 8e2 "; } ]; }) ] [ ]; };

  alphaDeferredAnywhere = {
    ir = plan [
      A
      (token "D" {
        rules = A.refAttr "rules";
        label = drv testDrv;
        keeper = testDrv;
      })
      (token "E" {
        rules = [ (A.ref [ "rules" 0 ]) { port = A.refAttr "port"; proto = compute (A.refAttr "value") (v: "p-${v}"); } ];
        label = ./lib.nix;
      })
    ] [ ];
  };

  alphaMeta =
    let
      W = alpha.resources.alpha_token {
        name = "W";
        provider = "alpha";
        dependsOn = [ A ];
        lifecycle = { preventDestroy = true; ignoreChanges = [ "label" ]; };
        config.label = "w";
      };
      ir = plan [ A W ] [ ];
    in
    {
      inherit ir;
      checks = {
        dependsOn = (node ir "alpha.alpha_token.W").meta.dependsOn == [ "alpha.alpha_token.A" ];
        lifecycle = (node ir "alpha.alpha_token.W").meta.lifecycle.preventDestroy;
      };
    };

  alphaOverrides =
    let
      O = alpha.resources.alpha_token {
        name = "O";
        config.label = "o";
        overrides = args: args // {
          lifecycle = { createBeforeDestroy = true; };
          config = args.config // { keeper = "set by overrides"; };
        };
      };
      ir = plan [ O ] [ ];
    in
    {
      inherit ir;
      checks = {
        lifecycle = (node ir "alpha.alpha_token.O").meta.lifecycle.createBeforeDestroy;
        config = (node ir "alpha.alpha_token.O").config == { label = "o"; keeper = "set by overrides"; };
      };
    };

  alphaCountForEach =
    let
      webs = count 2 (i: token "web" { label = "web-${toString i}"; });
      regions = forEach [ "eu" "us" ] (k: _: alpha.data.alpha_lookup { name = "region"; config.key = k; });
      ir = plan webs regions;
    in
    {
      inherit ir;
      checks.ids = map (n: n.id) (ir.resources ++ ir.data) == [
        "alpha.alpha_token.web__0" "alpha.alpha_token.web__1"
        "data.alpha.alpha_lookup.region__eu" "data.alpha.alpha_lookup.region__us"
      ];
    };

  kindsMinimal = {
    ir = plan [ K ] [ ];
    checks.config = (node (plan [ K ] [ ]) "kinds.kinds_thing.K").config == minimal;
  };

  kindsEverything = {
    ir = plan [
      (thing "E" {
        s = "s";
        n = 1.5;
        b = "true";
        dyn = { anything = [ 1 "two" { three = null; } ]; };
        tags = { env = "prod"; "a.b" = "dotted"; };
        ports = [ 1 2 "3" ];
        zones = [ "a" "b" ];
        pair = [ "x" 2 ];
        obj = { a = "A"; };
        matrix = [ { row = [ true false ]; } { } ];
        password = "hunter2";
        size = 10;
        "a b" = "spaced";
        "if" = "keyword";
        one = { x = "x"; y = null; };
        nmap = { first = { v = 1; }; second = { }; };
        nset = [ { v = 1; } { v = 2; } ];
        single = { name = "one"; };
        group = { flag = false; };
        list = [ { port = 1; inner = { v = "in"; }; } { port = 2; } ];
        set = [ { x = "same"; } { x = "same"; } ];
        map = { a = { v = 1; }; b = { }; };
        dynlist = [ { d = 1; } { d = [ "x" ]; } ];
      })
    ] [ ];
  };

  kindsDeferredBlocks = {
    ir = plan [
      K
      (thing "R" {
        s = K.refAttr "id";
        n = K.refAttr "n";
        single = K.refAttr "single";
        list = [ (K.ref [ "list" 0 ]) { port = K.ref [ "list" 0 "port" ]; inner = { v = str [ "v-" (K.refAttr "s") ]; }; } ];
        map = { a = K.ref [ "map" "a" ]; };
        obj = K.refAttr "obj";
        pair = [ (K.refAttr "s") (K.refAttr "n") ];
        tags = K.refAttr "tags";
        one = { x = drv "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x"; };
      })
    ] [ ];
  };

  kindsData = {
    ir = plan [ ] [ (kinds.data.kinds_info { name = "I"; }) (kinds.data.kinds_info { name = "J"; config = { all = null; }; }) ];
  };
}

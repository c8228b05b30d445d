# Unit tests of the Nix library: a list of { name; expr; expected; }.
# run.py evaluates them all in one `nix eval` and compares expr with expected.
{ lib }:
let
  inherit (lib) mkProvider mkResource mkData str compute drv count forEach byKey toIR vars;

  providers = {
    alpha = mkProvider { source = "provider-alpha"; };
    beta = mkProvider { source = "provider-beta"; version = "1.2.3"; config.endpoint = "http://beta"; };
  };

  A = mkResource { provider = "alpha"; type = "alpha_token"; name = "A"; };
  B = mkResource { provider = "beta"; type = "beta_record"; name = "B"; config.from = "x"; };

  secret = id: attr: { __sensitiveRef = { resource = id; path = [ attr ]; }; };
  ledgerA = {
    phase = 1;
    outputs."alpha.alpha_token.A" = {
      id = "alpha-0";
      value = "alpha::0";
      port = 8080;
      net = [ { ip = "10.0.0.1"; } { ip = "10.0.0.2"; } ];
      tags = { env = "prod"; "a.b" = "dotted"; };
      password = secret "alpha.alpha_token.A" "password";
    };
  };

  # toIR of A plus one consumer/resource whose config is `cfg`; returns C's IR node.
  withC = ledger: cfg:
    let
      C = mkResource { provider = "alpha"; type = "alpha_token"; name = "C"; config = cfg; };
      ir = toIR { inherit providers ledger; resources = [ A B C ]; };
    in
    { config = (builtins.elemAt ir.resources 2).config; edges = builtins.filter (e: e.to == C.id) ir.edges; };

  refMarker = id: path: { __ref = { resource = id; inherit path; }; };
  sensMarker = id: path: { __sensitiveRef = { resource = id; inherit path; }; };
  derivedMarker = inputs: { __derived = { inherit inputs; }; };
  edge = from: via: { inherit from via; to = "alpha.alpha_token.C"; };
  # An edge made by a plain reference also names the output it reads.
  refEdge = from: via: ref: edge from via // { inherit ref; };
  # An edge of a computed value names the outputs the computation reads.
  readsEdge = from: via: reads: edge from via // { inherit reads; };

  testDrv = derivation { name = "image"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; };
  fileDrv = testDrv // { passthru.filePath = "disk.vhd"; };

  webs = forEach { a = 1; b = 2; } (key: value: mkResource {
    provider = "alpha"; type = "alpha_token"; name = "web";
    config.label = "${key}-${toString value}";
  });
  workers = count 3 (i: mkResource {
    provider = "alpha"; type = "alpha_token"; name = "worker";
    config.label = str [ "w" i "-" ((byKey webs).a.refAttr "value") ];
  });
  expandedIR = toIR { inherit providers; resources = [ webs [ workers ] ]; };

  zone = mkData { provider = "alpha"; type = "alpha_zone"; name = "main"; config.name = "example.org"; };
  dataIR = toIR {
    inherit providers;
    resources = [ (mkResource { provider = "alpha"; type = "alpha_token"; name = "T"; config.label = zone.refAttr "zone_id"; dependsOn = [ A "beta.beta_record.B" ]; }) A B ];
    data = [ zone ];
    ledger.outputs."data.alpha.alpha_zone.main".zone_id = "Z1";
  };

  # ledgerA with Nivis's private channel: A's password and the variables' values.
  channelA = ledgerA // {
    secretsFile = builtins.toFile "channel.json" (builtins.toJSON {
      outputs."alpha.alpha_token.A".password = "pw-123";
      vars = { token = "tok-456"; region = "us-east-1"; };
    });
  };
  sensitiveMarker = value: { __sensitive = { inherit value; }; };
  secretDecls = { token = { type = "string"; sensitive = true; default = "dflt"; }; region = { type = "string"; }; };
  secretVars = vars channelA secretDecls;

  decls = {
    region = { type = "string"; default = "eu-west-1"; description = "where to deploy"; };
    replicas = { type = "number"; default = 2; };
    debug = { type = "bool"; default = false; sensitive = false; };
    tags = { type = "map"; default = { team = "infra"; }; };
    zones = { type = "list"; default = [ "a" ]; };
    extra = { default = null; };
  };
in
[
  # --- references -------------------------------------------------------------
  { name = "ref absent in ledger stays a __ref";
    expr = withC { } { label = A.refAttr "value"; };
    expected = { config.label = refMarker "alpha.alpha_token.A" [ "value" ]; edges = [ (refEdge "alpha.alpha_token.A" "label" [ "value" ]) ]; }; }
  { name = "ref known in ledger becomes the value and keeps its edge";
    expr = withC ledgerA { label = A.refAttr "value"; };
    expected = { config.label = "alpha::0"; edges = [ (refEdge "alpha.alpha_token.A" "label" [ "value" ]) ]; }; }
  { name = "ref with a nested path and index";
    expr = (withC ledgerA { ip = A.ref [ "net" 1 "ip" ]; env = A.ref [ "tags" "a.b" ]; }).config;
    expected = { ip = "10.0.0.2"; env = "dotted"; }; }
  { name = "ref past the end of a list stays a __ref";
    expr = (withC ledgerA { ip = A.ref [ "net" 5 "ip" ]; }).config;
    expected = { ip = refMarker "alpha.alpha_token.A" [ "net" 5 "ip" ]; }; }
  { name = "ref to a missing attribute of a known resource stays a __ref";
    expr = (withC ledgerA { x = A.refAttr "nope"; }).config;
    expected = { x = refMarker "alpha.alpha_token.A" [ "nope" ]; }; }
  { name = "ref to a sensitive output becomes a __sensitiveRef";
    expr = withC ledgerA { pw = A.refAttr "password"; };
    expected = { config.pw = sensMarker "alpha.alpha_token.A" [ "password" ]; edges = [ (refEdge "alpha.alpha_token.A" "pw" [ "password" ]) ]; }; }
  { name = "ref below a sensitive output keeps its full path";
    expr = (withC ledgerA { pw = A.ref [ "password" "inner" ]; }).config;
    expected = { pw = sensMarker "alpha.alpha_token.A" [ "password" "inner" ]; }; }
  { name = "a known ref can be any JSON value";
    expr = (withC ledgerA { net = A.refAttr "net"; port = A.refAttr "port"; }).config;
    expected = { net = [ { ip = "10.0.0.1"; } { ip = "10.0.0.2"; } ]; port = 8080; }; }
  { name = "via renders nested keys, indices and quoted keys";
    expr = map (e: e.via) (withC { } { disk = [ { size = A.refAttr "value"; } ]; tags."a.b" = A.refAttr "id"; "0x" = [ [ (A.refAttr "id") ] ]; }).edges;
    expected = [ ''["0x"][0][0]'' "disk[0].size" ''tags["a.b"]'' ]; }
  { name = "two refs to one resource at one path make one edge";
    expr = (withC { } { label = str [ (A.refAttr "id") (A.refAttr "value") ]; }).edges;
    expected = [ (readsEdge "alpha.alpha_token.A" "label" [ [ "id" ] [ "value" ] ]) ]; }

  # --- str and compute ------------------------------------------------------------
  { name = "str of plain parts is a plain string";
    expr = str [ "a" 1 "-" true "-" 1.5 ];
    expected = "a1-true-1.5"; }
  { name = "str with an unknown input is __derived";
    expr = withC { } { label = str [ "rec-" (A.refAttr "value") ]; };
    expected = { config.label = derivedMarker [ "alpha.alpha_token.A.value" ]; edges = [ (readsEdge "alpha.alpha_token.A" "label" [ [ "value" ] ]) ]; }; }
  { name = "str with known inputs is concrete and keeps its edges";
    expr = withC ledgerA { label = str [ "rec-" (A.refAttr "value") ":" (A.refAttr "port") ]; };
    expected = { config.label = "rec-alpha::0:8080"; edges = [ (readsEdge "alpha.alpha_token.A" "label" [ [ "value" ] [ "port" ] ]) ]; }; }
  # inputs list every output the value needs, known or not: the set is stable across phases.
  { name = "nested str lists the inputs of both, sorted and unique";
    expr = (withC ledgerA { label = str [ (str [ (B.refAttr "endpoint") (A.refAttr "value") ]) (A.refAttr "value") ]; }).config;
    expected = { label = derivedMarker [ "alpha.alpha_token.A.value" "beta.beta_record.B.endpoint" ]; }; }
  { name = "derived inputs name the top-level output attribute";
    expr = (withC { } { label = str [ (A.ref [ "net" 0 "ip" ]) (B.refAttr "endpoint") ]; }).config;
    expected = { label = derivedMarker [ "alpha.alpha_token.A.net" "beta.beta_record.B.endpoint" ]; }; }
  { name = "compute over an attrset of inputs, known";
    expr = (withC ledgerA { url = compute { ip = A.ref [ "net" 0 "ip" ]; port = A.refAttr "port"; } ({ ip, port }: "http://${ip}:${toString port}"); }).config;
    expected = { url = "http://10.0.0.1:8080"; }; }
  { name = "compute over a list and a single input, pending";
    expr = (withC ledgerA { a = compute [ (A.refAttr "value") (B.refAttr "endpoint") ] builtins.length; b = compute (B.refAttr "endpoint") (e: e); }).config;
    expected = { a = derivedMarker [ "alpha.alpha_token.A.value" "beta.beta_record.B.endpoint" ]; b = derivedMarker [ "beta.beta_record.B.endpoint" ]; }; }
  { name = "compute without references applies the function at once";
    expr = compute { a = 1; b = 2; } ({ a, b }: a + b);
    expected = 3; }
  { name = "compute may return structure holding further references";
    expr = withC ledgerA { n = compute (A.refAttr "port") (p: { port = p; record = B.refAttr "endpoint"; }); };
    expected = {
      config.n = { port = 8080; record = refMarker "beta.beta_record.B" [ "endpoint" ]; };
      edges = [ (readsEdge "alpha.alpha_token.A" "n" [ [ "port" ] ]) (refEdge "beta.beta_record.B" "n.record" [ "endpoint" ]) ];
    }; }
  { name = "compute may return a whole JSON value";
    expr = (withC ledgerA { ips = compute (A.refAttr "net") (net: map (n: n.ip) net); }).config;
    expected = { ips = [ "10.0.0.1" "10.0.0.2" ]; }; }

  # --- build outputs --------------------------------------------------------------------
  { name = "drv of a derivation carries out path and drvPath without context";
    expr = let d = drv testDrv; in [ (d.__build.path == testDrv.outPath) (d.__build.drvPath == testDrv.drvPath) (builtins.hasContext d.__build.path) (builtins.hasContext d.__build.drvPath) ];
    expected = [ true true false false ]; }
  { name = "drv uses passthru.filePath below the out path";
    expr = (drv fileDrv).__build.path;
    expected = builtins.unsafeDiscardStringContext "${testDrv.outPath}/disk.vhd"; }
  { name = "drv of a store path string has no drvPath";
    expr = drv "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x/disk.vhd";
    expected = { __build.path = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x/disk.vhd"; }; }
  { name = "a build leaf passes through toIR without an edge";
    expr = withC { } { source = drv "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x"; image = testDrv; };
    expected = { config = { source = { __build.path = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x"; }; image = drv testDrv; }; edges = [ ]; }; }

  # --- moves --------------------------------------------------------------------------
  { name = "moved takes resources or ids and toIR lists the moves";
    expr = (toIR { inherit providers; resources = [ A webs ];
      moved = [ (lib.moved { from = "alpha.alpha_token.old"; to = A; })
                [ (lib.moved { from = "alpha.alpha_token.web"; to = (byKey webs).a; }) ] ]; }).moved;
    expected = [
      { from = "alpha.alpha_token.old"; to = "alpha.alpha_token.A"; }
      { from = "alpha.alpha_token.web"; to = "alpha.alpha_token.web__a"; }
    ]; }
  { name = "importId goes into the node's meta";
    expr = (builtins.head (toIR { inherit providers; resources = [ (mkResource { provider = "alpha"; type = "alpha_token"; name = "I"; importId = "alpha-7"; }) ]; }).resources).meta;
    expected = { dependsOn = [ ]; importId = "alpha-7"; lifecycle = { preventDestroy = false; createBeforeDestroy = false; ignoreChanges = [ ]; }; }; }
  { name = "without moves the IR has no moved key";
    expr = (toIR { inherit providers; resources = [ A ]; }) ? moved;
    expected = false; }

  # --- expansion ------------------------------------------------------------------------
  { name = "forEach names instances <name>__<key>, sorted by key";
    expr = map (r: r.id) webs;
    expected = [ "alpha.alpha_token.web__a" "alpha.alpha_token.web__b" ]; }
  { name = "forEach passes key and value";
    expr = map (r: r.config.label) webs;
    expected = [ "a-1" "b-2" ]; }
  { name = "forEach over a list of strings";
    expr = map (r: [ r.id r.key r.config.label ]) (forEach [ "x" "y" ] (k: v: mkResource { provider = "alpha"; type = "t"; name = "n"; config.label = v; }));
    expected = [ [ "alpha.t.n__x" "x" "x" ] [ "alpha.t.n__y" "y" "y" ] ]; }
  { name = "count names instances <name>__<index>";
    expr = map (r: [ r.id r.key ]) workers;
    expected = [ [ "alpha.alpha_token.worker__0" 0 ] [ "alpha.alpha_token.worker__1" 1 ] [ "alpha.alpha_token.worker__2" 2 ] ]; }
  { name = "count of data sources";
    expr = map (r: r.id) (count 2 (i: mkData { provider = "alpha"; type = "z"; name = "d"; }));
    expected = [ "data.alpha.z.d__0" "data.alpha.z.d__1" ]; }
  { name = "count of ephemeral resources";
    expr = map (r: r.id) (count 1 (i: lib.mkEphemeral { provider = "alpha"; type = "z"; name = "e"; }));
    expected = [ "ephemeral.alpha.z.e__0" ]; }
  { name = "an instance of an instance: names nest, the caller's arguments are kept";
    expr = map (r: [ r.id r.name r.key r.config.label r._args.name ])
      (forEach [ "x" ] (k: v: builtins.elemAt (count 2 (i: mkResource { provider = "alpha"; type = "t"; name = "n"; config.label = "${v}${toString i}"; })) 1));
    expected = [ [ "alpha.t.n__1__x" "n__1__x" "x" "x1" "n" ] ]; }
  { name = "an instance with a plain and a referencing config in one toIR";
    expr = map (r: [ r.id r.config r.meta ]) (toIR {
      inherit providers;
      resources = count 2 (i: mkResource {
        provider = "alpha"; type = "t"; name = "n";
        config = if i == 0 then { v = 1; } else { v = A.refAttr "id"; };
        dependsOn = if i == 0 then [ ] else [ A ];
      }) ++ [ A ];
    }).resources;
    expected = [
      [ "alpha.t.n__0" { v = 1; } { dependsOn = [ ]; lifecycle = { preventDestroy = false; createBeforeDestroy = false; ignoreChanges = [ ]; }; } ]
      [ "alpha.t.n__1" { v = refMarker "alpha.alpha_token.A" [ "id" ]; } { dependsOn = [ "alpha.alpha_token.A" ]; lifecycle = { preventDestroy = false; createBeforeDestroy = false; ignoreChanges = [ ]; }; } ]
      [ "alpha.alpha_token.A" { } { dependsOn = [ ]; lifecycle = { preventDestroy = false; createBeforeDestroy = false; ignoreChanges = [ ]; }; } ]
    ]; }
  { name = "expanded instances in toIR, nested lists flattened, refs between instances";
    expr = {
      ids = map (r: r.id) expandedIR.resources;
      edges = expandedIR.edges;
      label = (builtins.elemAt expandedIR.resources 3).config.label;
    };
    expected = {
      ids = [ "alpha.alpha_token.web__a" "alpha.alpha_token.web__b" "alpha.alpha_token.worker__0" "alpha.alpha_token.worker__1" "alpha.alpha_token.worker__2" ];
      edges = map (i: { from = "alpha.alpha_token.web__a"; to = "alpha.alpha_token.worker__${toString i}"; via = "label"; reads = [ [ "value" ] ]; }) [ 0 1 2 ];
      label = derivedMarker [ "alpha.alpha_token.web__a.value" ];
    }; }
  { name = "byKey indexes instances by key";
    expr = builtins.mapAttrs (k: r: r.id) (byKey workers);
    expected = { "0" = "alpha.alpha_token.worker__0"; "1" = "alpha.alpha_token.worker__1"; "2" = "alpha.alpha_token.worker__2"; }; }

  # --- nodes, meta, data sources ----------------------------------------------------------
  { name = "dependsOn takes resources and ids and yields dependsOn edges";
    expr = { meta = (builtins.head dataIR.resources).meta; edges = builtins.filter (e: e.to == "alpha.alpha_token.T") dataIR.edges; };
    expected = {
      meta = { dependsOn = [ "alpha.alpha_token.A" "beta.beta_record.B" ]; lifecycle = { preventDestroy = false; createBeforeDestroy = false; ignoreChanges = [ ]; }; };
      edges = [
        { from = "data.alpha.alpha_zone.main"; to = "alpha.alpha_token.T"; via = "label"; ref = [ "zone_id" ]; }
        { from = "alpha.alpha_token.A"; to = "alpha.alpha_token.T"; via = "dependsOn"; }
        { from = "beta.beta_record.B"; to = "alpha.alpha_token.T"; via = "dependsOn"; }
      ];
    }; }
  { name = "data source node: data. id, no lifecycle, its outputs resolve refs";
    expr = { data = dataIR.data; label = (builtins.head dataIR.resources).config.label; };
    expected = {
      data = [ { id = "data.alpha.alpha_zone.main"; provider = "alpha"; type = "alpha_zone"; name = "main"; config.name = "example.org"; meta.dependsOn = [ ]; } ];
      label = "Z1";
    }; }
  { name = "lifecycle fields and ignoreChanges in string and list form";
    expr = (builtins.head (toIR { inherit providers; resources = [ (mkResource {
      provider = "alpha"; type = "t"; name = "n";
      lifecycle = { preventDestroy = true; ignoreChanges = [ "tags" [ "tags" "a.b" ] [ "disk" 0 "size" ] "*" ]; };
    }) ]; }).resources).meta.lifecycle;
    expected = { preventDestroy = true; createBeforeDestroy = false; ignoreChanges = [ "tags" ''tags["a.b"]'' "disk[0].size" "*" ]; }; }
  { name = "providers: version only when given, config refs resolved without edges";
    expr = let ir = toIR { providers = providers // { gamma = { source = "g"; config.token = A.refAttr "value"; }; }; resources = [ A ]; ledger = ledgerA; }; in
      { inherit (ir) providers edges; };
    expected = {
      providers = {
        alpha = { source = "provider-alpha"; config = { }; };
        beta = { source = "provider-beta"; version = "1.2.3"; config.endpoint = "http://beta"; };
        gamma = { source = "g"; config.token = "alpha::0"; };
      };
      edges = [ ];
    }; }
  { name = "consumers become nixConsumers sorted by id, without edges";
    expr = let ir = toIR { inherit providers; resources = [ A ]; ledger = ledgerA; consumers = { z.v = [ (A.refAttr "value") (A.refAttr "password") ]; a = str [ "x" (A.refAttr "id") ]; }; }; in
      { inherit (ir) nixConsumers edges; };
    expected = {
      nixConsumers = [ { id = "a"; value = "xalpha-0"; } { id = "z"; value.v = [ "alpha::0" (sensMarker "alpha.alpha_token.A" [ "password" ]) ]; } ];
      edges = [ ];
    }; }
  { name = "empty ledger, missing ledger and null ledger behave alike";
    expr = let f = l: (builtins.elemAt (toIR ({ inherit providers; resources = [ A B (mkResource { provider = "alpha"; type = "t"; name = "n"; config.x = A.refAttr "id"; }) ]; } // l)).resources 2).config; in
      [ (f { }) (f { ledger = { }; }) (f { ledger = null; }) (f { ledger = { phase = 0; }; }) (f { ledger = { outputs = null; vars = null; }; }) ];
    expected = let m = { x = refMarker "alpha.alpha_token.A" [ "id" ]; }; in [ m m m m m ]; }
  { name = "derivations, flake sources and plain keys in config";
    expr = (withC { } { src = { outPath = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-src"; }; _type = "not-nivis"; }).config;
    expected = { src = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-src"; _type = "not-nivis"; }; }

  # --- provider kinds --------------------------------------------------------------------------
  { name = "a nixops4 provider carries its kind and stateless types; tfplugin stays as before";
    expr = let
      local = mkProvider { source = "/opt/nixops4-resources-local"; kind = "nixops4"; statelessTypes = [ "file" ]; };
      m = mkResource { provider = "local"; type = "memo"; name = "m"; config.initialize_with = A.refAttr "value"; };
      f = mkResource { provider = "local"; type = "file"; name = "f"; config = { name = "/tmp/x"; contents = str [ "v=" (m.refAttr "value") ]; }; };
      ir = toIR { providers = providers // { inherit local; tf = mkProvider { source = "t"; kind = "tfplugin"; }; }; resources = [ A m f ]; ledger = ledgerA; };
    in { inherit (ir.providers) local tf alpha; configs = map (r: r.config) ir.resources; };
    expected = {
      local = { source = "/opt/nixops4-resources-local"; kind = "nixops4"; statelessTypes = [ "file" ]; config = { }; };
      tf = { source = "t"; config = { }; };
      alpha = { source = "provider-alpha"; config = { }; };
      configs = [ { } { initialize_with = "alpha::0"; } { name = "/tmp/x"; contents = derivedMarker [ "local.memo.m.value" ]; } ];
    }; }
  { name = "a provider source may be a path";
    expr = (mkProvider { source = /opt/bin/provider; kind = "nixops4"; }).source;
    expected = "/opt/bin/provider"; }
  { name = "a provider source may be a package: its out path, built from the drvPath in the IR";
    expr =
      let
        pkg = { type = "derivation"; outPath = "/nix/store/aaaa-terraform-provider-x"; drvPath = "/nix/store/bbbb-terraform-provider-x.drv"; };
        ir = p: (toIR { providers.x = p; resources = [ ]; }).providers.x;
      in
      [ (ir (mkProvider { source = pkg; })) (ir (mkProvider { source = drv pkg; })) ];
    expected = [
      { source = "/nix/store/aaaa-terraform-provider-x"; drvPath = "/nix/store/bbbb-terraform-provider-x.drv"; config = { }; }
      { source = "/nix/store/aaaa-terraform-provider-x"; drvPath = "/nix/store/bbbb-terraform-provider-x.drv"; config = { }; }
    ]; }

  # --- conditions and checks (lib/conditions.nix) ---------------------------------------------
  { name = "a precondition not known yet holds the resource back and orders it after its inputs";
    expr = let
      C = mkResource { provider = "alpha"; type = "alpha_token"; name = "C"; lifecycle.precondition = [
        { condition = compute { v = A.refAttr "value"; } ({ v }: v != ""); message = "A has a value"; } ]; };
      ir = toIR { inherit providers; resources = [ A C ]; ledger = { }; };
    in [ (builtins.elemAt ir.resources 1).meta.lifecycle.preconditionPending ir.edges ];
    expected = [
      { __derived.inputs = [ "alpha.alpha_token.A.value" ]; }
      [ { from = "alpha.alpha_token.A"; to = "alpha.alpha_token.C"; via = "lifecycle.precondition[0]"; reads = [ [ "value" ] ]; } ]
    ]; }
  { name = "a precondition that holds leaves the lifecycle as it is, and keeps the edge";
    expr = let
      C = mkResource { provider = "alpha"; type = "alpha_token"; name = "C"; lifecycle.precondition = [
        { condition = A.refAttr "ok"; message = "unused"; }
        { condition = compute { p = A.refAttr "port"; } ({ p }: p == 8080); message = "port 8080"; } ]; };
      ir = toIR { inherit providers; resources = [ A C ]; ledger.outputs."alpha.alpha_token.A" = { port = 8080; ok = true; }; };
    in [ (builtins.elemAt ir.resources 1).meta.lifecycle (map (e: e.via) ir.edges) ];
    expected = [
      { preventDestroy = false; createBeforeDestroy = false; ignoreChanges = [ ]; }
      [ "lifecycle.precondition[0]" "lifecycle.precondition[1]" ]
    ]; }
  { name = "replaceTriggeredBy names whole resources and outputs in the lifecycle, each with its edge";
    expr = let
      C = mkResource { provider = "alpha"; type = "alpha_token"; name = "C";
        lifecycle.replaceTriggeredBy = [ A (A.refAttr "value") (A.ref [ "net" 0 "ip" ]) ]; };
      ir = toIR { inherit providers; resources = [ A C ]; ledger = { }; };
    in [ (builtins.elemAt ir.resources 1).meta.lifecycle.replaceTriggeredBy (map (e: e.via) ir.edges) ];
    expected = [
      [ { resource = "alpha.alpha_token.A"; } { resource = "alpha.alpha_token.A"; path = [ "value" ]; }
        { resource = "alpha.alpha_token.A"; path = [ "net" 0 "ip" ]; } ]
      [ "lifecycle.replaceTriggeredBy[0]" "lifecycle.replaceTriggeredBy[1]" "lifecycle.replaceTriggeredBy[2]" ]
    ]; }
  { name = "postconditions are unknown until the object is recorded, then checked against its outputs";
    expr = let
      P = mkResource { provider = "alpha"; type = "alpha_token"; name = "A"; lifecycle.postcondition = [
        { condition = self: self.port == 8080; message = "port 8080"; }
        { condition = self: self.value == "other"; message = "value other"; } ]; };
      st = ledger: map (c: c.status) (toIR { inherit providers ledger; resources = [ P ]; }).conditions;
    in [ (st { }) (st ledgerA) ];
    expected = [ [ "unknown" "unknown" ] [ "pass" "fail" ] ]; }
  { name = "checks are pass, fail or unknown, in the IR's conditions";
    expr = (toIR {
      inherit providers; resources = [ A B ]; ledger = ledgerA;
      checks = [
        (lib.check { name = "port"; "assert" = compute { p = A.refAttr "port"; } ({ p }: p > 1024); message = "high port"; })
        (lib.check { name = "static"; condition = false; message = "always fails"; })
        (lib.check { name = "later"; "assert" = compute { x = B.refAttr "x"; } ({ x }: x); message = "B"; })
      ]; }).conditions;
    expected = [
      { kind = "check"; name = "port"; message = "high port"; status = "pass"; }
      { kind = "check"; name = "static"; message = "always fails"; status = "fail"; }
      { kind = "check"; name = "later"; message = "B"; status = "unknown"; }
    ]; }
  { name = "a plan without conditions has no conditions section";
    expr = (toIR { inherit providers; resources = [ A ]; ledger = { }; }) ? conditions;
    expected = false; }

  { name = "removed entries are in the IR, destroy defaulting to true";
    expr = (toIR { inherit providers; resources = [ A ]; ledger = { }; removed = [
      (lib.removed { from = "alpha.alpha_token.old"; destroy = false; })
      (lib.removed { from = mkResource { provider = "alpha"; type = "alpha_token"; name = "gone"; }; })
    ]; }).removed;
    expected = [ { from = "alpha.alpha_token.old"; destroy = false; } { from = "alpha.alpha_token.gone"; destroy = true; } ]; }

  # --- variables -------------------------------------------------------------------------------
  { name = "vars applies defaults";
    expr = vars { } decls;
    expected = { region = "eu-west-1"; replicas = 2; debug = false; tags.team = "infra"; zones = [ "a" ]; extra = null; }; }
  { name = "vars prefers ledger.vars";
    expr = vars { vars = { region = "us-east-1"; replicas = 2.5; extra = [ 1 ]; }; } decls;
    expected = { region = "us-east-1"; replicas = 2.5; debug = false; tags.team = "infra"; zones = [ "a" ]; extra = [ 1 ]; }; }
  { name = "vars reads command-line text by the declared type";
    # The executor sends text values twice: guessed as JSON in vars, verbatim in varsText.
    expr = vars { vars = { region = 2; replicas = 2.5; debug = true; extra = 7; }; varsText = { region = "2"; replicas = "2.50"; debug = "true"; extra = "7"; }; } decls;
    expected = { region = "2"; replicas = 2.5; debug = true; tags.team = "infra"; zones = [ "a" ]; extra = 7; }; }
  { name = "vars without varsText (older executors) uses vars";
    expr = (vars { vars.region = "x"; varsText = null; } decls).region;
    expected = "x"; }
  { name = "a variable whose validation holds keeps its value, and its rules stay out of the IR";
    expr = let d = { n = { type = "number"; default = 3; validation = [ { condition = v: v > 0; message = "positive"; } { condition = v: v < 10; message = "small"; } ]; }; }; in
      [ (vars { } d).n (toIR { inherit providers; variables = d; ledger = { }; }).variables.n ];
    expected = [ 3 { type = "number"; default = 3; } ]; }
  { name = "variables are declared in the IR";
    expr = (toIR { inherit providers; variables = decls; ledger.vars.region = "x"; }).variables;
    expected = {
      region = { type = "string"; default = "eu-west-1"; description = "where to deploy"; };
      replicas = { type = "number"; default = 2; };
      debug = { type = "bool"; default = false; sensitive = false; };
      tags = { type = "map"; default = { team = "infra"; }; };
      zones = { type = "list"; default = [ "a" ]; };
      extra = { default = null; };
    }; }

  # --- secrets through the private channel --------------------------------------------------
  { name = "a value derived from a sensitive output is computed from the channel and marked";
    expr = withC channelA { label = str [ "postgres://app:" (A.refAttr "password") "@db" ]; url = compute { pw = A.refAttr "password"; v = A.refAttr "value"; } ({ pw, v }: { inherit pw v; }); };
    expected = {
      config = { label = sensitiveMarker "postgres://app:pw-123@db"; url = sensitiveMarker { pw = "pw-123"; v = "alpha::0"; }; };
      edges = [ (readsEdge "alpha.alpha_token.A" "label" [ [ "password" ] ]) (readsEdge "alpha.alpha_token.A" "url" [ [ "password" ] [ "value" ] ]) ];
    }; }
  { name = "a direct reference to a sensitive output stays a __sensitiveRef with the channel";
    expr = (withC channelA { pw = A.refAttr "password"; }).config;
    expected = { pw = sensMarker "alpha.alpha_token.A" [ "password" ]; }; }
  { name = "a derived value waiting on another input stays __derived";
    expr = (withC channelA { label = str [ (A.refAttr "password") (B.refAttr "endpoint") ]; }).config;
    expected = { label = derivedMarker [ "alpha.alpha_token.A.password" "beta.beta_record.B.endpoint" ]; }; }
  { name = "variables come from the channel; a sensitive one is marked wherever it goes";
    expr = {
      region = secretVars.region;
      inherit ((withC channelA { direct = secretVars.token; built = str [ "u:" secretVars.token ]; plain = secretVars.region; }).config) direct built plain;
      consumer = (toIR { inherit providers; ledger = channelA; consumers.c = [ secretVars.token ]; }).nixConsumers;
    };
    expected = {
      region = "us-east-1";
      direct = sensitiveMarker "tok-456";
      built = sensitiveMarker "u:tok-456";
      plain = "us-east-1";
      consumer = [ { id = "c"; value = [ (sensitiveMarker "tok-456") ]; } ];
    }; }
  { name = "a sensitive variable's default is not repeated in the IR";
    expr = (toIR { inherit providers; ledger = channelA; variables = secretDecls; }).variables;
    expected = { token = { type = "string"; sensitive = true; }; region = { type = "string"; }; }; }
  { name = "secrets reach a nixops4 resource like any other: referenced, derived, from a variable";
    expr = let
      local = mkProvider { source = "/opt/nixops4-resources-local"; kind = "nixops4"; };
      m = mkResource { provider = "local"; type = "memo"; name = "m"; config = {
        direct = A.refAttr "password";
        initialize_with = str [ "pw=" (A.refAttr "password") ];
        token = secretVars.token;
      }; };
      ir = toIR { providers = providers // { inherit local; }; resources = [ A m ]; ledger = channelA; };
    in { inherit (ir.providers) local; config = (builtins.elemAt ir.resources 1).config; };
    expected = {
      local = { source = "/opt/nixops4-resources-local"; kind = "nixops4"; statelessTypes = [ ]; config = { }; };
      config = {
        direct = sensMarker "alpha.alpha_token.A" [ "password" ];
        initialize_with = sensitiveMarker "pw=pw-123";
        token = sensitiveMarker "tok-456";
      };
    }; }

  # lib.modules: priorities, conditions, merging.
  { name = "modules: plain beats mkDefault, mkForce beats plain, mkIf false drops";
    expr = let
      m = lib.modules; t = m.types;
      ev = m.eval { modules = [
        { options.a = m.mkOption { type = t.str; }; options.b = m.mkOption { type = t.int; default = 1; };
          options.c = m.mkOption { type = t.str; default = "d"; }; config.a = m.mkDefault "low"; }
        { a = "plain"; b = m.mkForce 7; }
        { b = 3; c = m.mkIf false "never"; }
      ]; };
    in { inherit (ev.config) a b c; };
    expected = { a = "plain"; b = 7; c = "d"; }; }
  { name = "modules: lists concatenate in module order, attrsOf merges per key, mkMerge";
    expr = let
      m = lib.modules; t = m.types;
      ev = m.eval { modules = [
        { options.l = m.mkOption { type = t.listOf t.int; default = [ ]; };
          options.s = m.mkOption { type = t.attrsOf t.str; default = { }; };
          config = m.mkMerge [ { l = [ 1 ]; } { s.x = "1"; } ]; }
        ({ config, ... }: { l = [ 2 ]; s.y = "from-${config.s.x}"; })
      ]; };
    in { inherit (ev.config) l s; };
    expected = { l = [ 1 2 ]; s = { x = "1"; y = "from-1"; }; }; }
  { name = "modules: a condition may read config; imports are followed once";
    expr = let
      m = lib.modules; t = m.types;
      shared = { options.on = m.mkOption { type = t.bool; default = true; }; };
      ev = m.eval { modules = [
        { imports = [ shared ]; options.v = m.mkOption { type = t.int; default = 0; }; }
        ({ config, ... }: { config = m.mkIf config.on { v = 5; }; })
      ]; };
    in ev.config.v;
    expected = 5; }
  { name = "modules: nivis.checks and nivis.removed reach the IR";
    expr = let
      ir = lib.modules.toIR { ledger = { }; modules = [ {
        nivis.providers = { inherit (providers) alpha; };
        nivis.checks = [ (lib.check { name = "c"; condition = true; message = "m"; }) ];
        nivis.removed = [ (lib.removed { from = "alpha.alpha_token.old"; destroy = false; }) ];
      } ]; };
    in [ ir.conditions ir.removed ];
    expected = [ [ { kind = "check"; name = "c"; message = "m"; status = "pass"; } ] [ { from = "alpha.alpha_token.old"; destroy = false; } ] ]; }
  { name = "modules: two instances of one module (attrsOf submodule) get their own addresses";
    expr = let
      m = lib.modules; t = m.types;
      db = { config, lib, ... }: {
        options.label = lib.modules.mkOption { type = lib.modules.types.str; };
        config.nivis.resources = [ (lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "main"; config.label = config.label; }) ];
        config.nivis.data = [ (lib.mkData { provider = "alpha"; type = "alpha_token"; name = "look"; }) ];
      };
      ir = m.toIR { ledger = { }; modules = [ {
        options.db = m.mkOption { type = t.attrsOf (t.submodule db); };
        options.replicas = m.mkOption { type = t.listOf (t.submodule db); default = [ ]; };
        config = { nivis.providers = { inherit (providers) alpha; }; db.eu.label = "e"; db.us.label = "u"; replicas = [ { label = "r"; } ]; };
      } ]; };
    in [ (map (n: [ n.id n.module n.config.label ]) ir.resources) (map (n: n.id) ir.data) ];
    expected = [
      [ [ "module.db__eu.alpha.alpha_token.main" "module.db__eu" "e" ]
        [ "module.db__us.alpha.alpha_token.main" "module.db__us" "u" ]
        [ "module.replicas__0.alpha.alpha_token.main" "module.replicas__0" "r" ] ]
      [ "data.module.db__eu.alpha.alpha_token.look" "data.module.db__us.alpha.alpha_token.look" "data.module.replicas__0.alpha.alpha_token.look" ]
    ]; }
  { name = "modules: a reference inside an instance points at the instance's own resource";
    expr = let
      m = lib.modules; t = m.types;
      pair = { lib, ... }: {
        config.nivis.resources = let a = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "a"; }; in
          [ a (lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "b"; config.from = a.refAttr "value"; }) ];
      };
      ir = m.toIR { ledger = { }; modules = [ {
        options.p = m.mkOption { type = t.attrsOf (t.submodule pair); };
        config = { nivis.providers = { inherit (providers) alpha; }; p.x = { }; };
      } ]; };
    in map (e: [ e.from e.to ]) ir.edges;
    expected = [ [ "module.p__x.alpha.alpha_token.a" "module.p__x.alpha.alpha_token.b" ] ]; }
  # lib.policy: the runner.
  { name = "policy: static, plan and phase rules; messages; levels";
    expr = (import ../../nix/lib/policy.nix).run [
      (lib.policy.static { name = "s"; check = r: r.config ? team; message = r: "no team on ${r.id}"; })
      (lib.policy.plan { name = "p"; level = "advisory"; check = c: if c.action == "delete" then "no deletes" else true; })
      (lib.policy.phase { name = "f"; check = cs: builtins.length cs < 2; })
    ] { kind = "plan"; resources = [ ]; changes = [ { address = "a"; action = "delete"; } { address = "b"; action = "create"; } ]; };
    expected = { names = [ "s" "p" "f" ]; staticRules = 1; planRules = 2; violations = [
      { rule = "p"; level = "advisory"; address = "a"; message = "no deletes"; }
      { rule = "f"; level = "mandatory"; address = null; message = "the rule f does not hold"; }
    ]; }; }
  { name = "positions: asked by the ledger, toIR gives each node's and config attribute's line instead of the IR";
    expr = let
      P = mkResource {
        provider = "alpha";
        type = "alpha_token";
        name = "P";
        config.tags.env = "x";
      };
      pos = (toIR { inherit providers; resources = [ P ]; ledger = { positions = true; }; }).positions."alpha.alpha_token.P";
      line = p: p.line - (builtins.unsafeGetAttrPos "provider" P._args).line;
    in { definition = line pos.definition; tags = line pos.attributes.tags; env = line pos.attributes."tags.env"; keys = builtins.attrNames pos; };
    # The definition is the line of `name` (DESIGN §91).
    expected = { definition = 2; tags = 3; env = 3; keys = [ "attributes" "definition" ]; }; }
  { name = "variablesOnly: asked by the ledger, toIR gives the declarations alone, checking no value and forcing nothing else";
    expr = toIR {
      inherit providers;
      resources = [ (mkResource { provider = "alpha"; type = "alpha_token"; name = "X"; config.label = throw "not forced"; }) ];
      variables = { port = { type = "number"; }; pw = { type = "string"; sensitive = true; default = "dflt-secret"; }; };
      ledger = { vars.port = "not a number"; variablesOnly = true; };
    };
    expected = { variables = { port = { type = "number"; }; pw = { type = "string"; sensitive = true; }; }; }; }
  { name = "withoutLedger: set when toIR is called without a ledger, absent when one is given";
    expr = {
      without = (toIR { inherit providers; resources = [ A ]; }).withoutLedger or null;
      given = (toIR { inherit providers; resources = [ A ]; ledger = ledgerA; }) ? withoutLedger;
    };
    expected = { without = true; given = false; }; }
  { name = "lib.checks: a well-formed plan gives a check per file, each carrying the IR it evaluated";
    expr = let
      plan = ledger: toIR { inherit providers ledger; resources = [ A (mkResource { provider = "alpha"; type = "alpha_token"; name = "D"; config.label = str [ "v-" (A.refAttr "value") ]; }) ]; };
      checks = lib.checks { inherit plan; ledger = { resources = ledgerA.outputs; }; golden = builtins.toFile "ir.json" (builtins.toJSON (plan ledgerA)); };
    in { names = builtins.attrNames checks; label = (builtins.elemAt checks.nivis-plan.ir.resources 1).config.label; type = checks.nivis-plan-golden.type; builder = checks.nivis-plan.builder; };
    expected = { names = [ "nivis-plan" "nivis-plan-golden" ]; label = "v-alpha::0"; type = "derivation"; builder = "builtin:buildenv"; }; }
  { name = "an ephemeral result reaches a config only through Nix: __derived until the channel has it, then __ephemeral; no edge";
    expr = let
      t = lib.mkEphemeral { provider = "alpha"; type = "alpha_ticket"; name = "T"; config.scope = A.refAttr "id"; };
      c = mkResource { provider = "alpha"; type = "alpha_account"; name = "C"; config = {
        direct = t.refAttr "token";
        built = str [ "pw-" (t.refAttr "token") ];
      }; };
      opened = ledgerA // {
        secretsFile = builtins.toFile "channel.json" (builtins.toJSON {
          outputs = { }; vars = { };
          ephemeral."ephemeral.alpha.alpha_ticket.T" = { scope = "alpha-0"; token = "tok-1"; };
        });
      };
      irOf = ledger: toIR { inherit providers ledger; resources = [ A c ]; ephemeral = [ t ]; };
      before = irOf ledgerA;
      after = irOf opened;
    in {
      before = (builtins.elemAt before.resources 1).config;
      after = (builtins.elemAt after.resources 1).config;
      inherit (after) ephemeral edges;
    };
    expected = {
      before = {
        direct = { __derived.inputs = [ "ephemeral.alpha.alpha_ticket.T.token" ]; };
        built = { __derived.inputs = [ "ephemeral.alpha.alpha_ticket.T.token" ]; };
      };
      after = {
        direct = { __ephemeral.value = "tok-1"; };
        built = { __ephemeral.value = "pw-tok-1"; };
      };
      ephemeral = [ { id = "ephemeral.alpha.alpha_ticket.T"; provider = "alpha"; type = "alpha_ticket"; name = "T"; config.scope = "alpha-0"; } ];
      edges = [ ];
    }; }

  { name = "remoteState: another project's outputs are plain values, its secrets stay sensitive";
    expr =
      let
        ledger = {
          remoteStates.net = {
            lineage = "lin-1"; serial = 4;
            outputs."alpha.alpha_token.a" = { value = "v1"; secret = secret "alpha.alpha_token.a" "secret"; };
          };
          secretsFile = builtins.toFile "channel.json" (builtins.toJSON {
            outputs = { }; vars = { };
            remoteStates.net."alpha.alpha_token.a".secret = "s3cret";
          });
        };
        net = lib.remoteState ledger "net";
        a = net.outputs."alpha.alpha_token.a";
        C = mkResource { provider = "alpha"; type = "alpha_token"; name = "C"; config = {
          label = a.value; direct = a.secret; built = str [ "x-" a.secret ];
          n = builtins.stringLength a.value; }; };
        ir = toIR { inherit providers ledger; resources = [ C ]; };
      in { inherit (net) name lineage serial; config = (builtins.head ir.resources).config; inherit (ir) edges; };
    expected = {
      name = "net"; lineage = "lin-1"; serial = 4;
      config = { label = "v1"; direct = { __sensitive.value = "s3cret"; }; built = { __sensitive.value = "x-s3cret"; }; n = 2; };
      edges = [ ];
    }; }
]

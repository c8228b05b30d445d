# Property-test generator: `graphs` pseudo-random resource graphs (builtins only,
# seeded through builtins.hashString) with nested attrsets and lists, count and
# forEach expansion, data sources, references to earlier nodes, derived values,
# build outputs, consumers, variables and ledgers.
#
# Each graph is evaluated twice: with a partial ledger (a random subset of nodes
# applied) and with a full ledger (every node applied). run.py writes every IR to
# a file, validates them all with check.py and checks the resolution properties.
# Every ledger names a private channel holding each node's `secret` (SECRET-<id>):
# derived values may compute with secrets, and run.py checks that a secret appears in
# an IR only inside a __sensitive value.
{ lib, graphs ? 200, seed ? "nivis" }:
let
  inherit (builtins)
    concatLists elemAt foldl' genList hashString length listToAttrs substring;

  hexValue = listToAttrs (genList (i: { name = substring i 1 "0123456789abcdef"; value = i; }) 16);

  # A pseudo-random integer in [0, n), a pure function of `key`.
  rand = key: n:
    let
      h = hashString "sha256" key;
      v = foldl' (acc: i: acc * 16 + hexValue.${substring i 1 h}) 0 (genList (i: i) 7);
    in
    v - (v / n) * n;
  pick = key: xs: elemAt xs (rand key (length xs));
  chance = key: percent: rand key 100 < percent;

  providerIds = [ "alpha" "beta" "registry.example.org/acme/gamma" ];
  attrKeys = [ "label" "name" "tags" "a.b" "with space" "0num" "x-y" "_u" "deep" "list" "q\"uote" "__not" ];
  instanceKeys = [ "a" "b" "eu-west-1" "x_1" "0" "Z" ];

  image = derivation { name = "image"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; };

  # What an applied node reports; `secret` is a sensitive output (placeholder only).
  outputsFor = id: {
    id = "id-${id}";
    value = "value-${id}";
    port = 8080;
    net = [ { ip = "10.0.0.1"; } { ip = "10.0.0.2"; } ];
    tags = { env = "prod"; "a.b" = "dotted"; };
    secret = { __sensitiveRef = { resource = id; path = [ "secret" ]; }; };
  };

  # The private channel: every node's secret, as Nivis would pass it.
  channelFor = ids: builtins.toFile "channel.json" (builtins.toJSON {
    outputs = listToAttrs (map (id: { name = id; value.secret = "SECRET-${id}"; }) ids);
    vars = { };
  });

  # A reference that may be used inside a derived value (a sensitive output now and then).
  secretRef = key: earlier: (pick "${key}/secret" earlier).refAttr "secret";
  plainRef = key: earlier:
    let t = pick "${key}/target" earlier; in
    pick "${key}/ref" [ (t.refAttr "value") (t.refAttr "id") (t.ref [ "net" 1 "ip" ]) (t.ref [ "tags" "a.b" ]) (t.refAttr "port") ];

  directRef = key: earlier:
    if chance "${key}/secret" 25 then (pick "${key}/starget" earlier).refAttr "secret"
    else if chance "${key}/whole" 20 then (pick "${key}/wtarget" earlier).refAttr "net"
    else plainRef key earlier;

  derived = key: earlier:
    let r = rand "${key}/how" 5; in
    if r == 0 then lib.str [ "x-" (plainRef "${key}/a" earlier) "-" (rand "${key}/n" 9) ]
    else if r == 1 then lib.str [ (lib.str [ (plainRef "${key}/b" earlier) ]) "/" (plainRef "${key}/c" earlier) ]
    else if r == 2 then
      lib.compute { a = plainRef "${key}/d" earlier; b = plainRef "${key}/e" earlier; }
        ({ a, b }: { joined = "${toString a}+${toString b}"; parts = [ a b ]; })
    else if r == 3 then lib.compute [ (plainRef "${key}/f" earlier) ] (xs: {
      count = length xs;
      # a derived value may hold further references, resolved on their own
      again = directRef "${key}/g" earlier;
    })
    # computed from a secret: __sensitive once known
    else lib.str [ "conn:" (secretRef "${key}/h" earlier) "@" (plainRef "${key}/i" earlier) ];

  value = key: depth: earlier:
    let
      limit = if depth >= 3 then 4 else 9;
      r = rand "${key}/kind" limit;
      refs = earlier != [ ];
    in
    if r == 0 then "s${toString (rand "${key}/s" 100)}"
    else if r == 1 then pick "${key}/scalar" [ (rand "${key}/i" 1000) true false null 1.5 "" ]
    else if r == 2 && refs then directRef key earlier
    else if r == 3 && refs then derived key earlier
    else if r == 4 then tree key (depth + 1) earlier
    else if r == 5 then genList (j: value "${key}/l${toString j}" (depth + 1) earlier) (rand "${key}/len" 4)
    else if r == 6 then (if chance "${key}/drv" 50 then lib.drv image else lib.drv "/nix/store/0000000000000000000000000000000a-x/disk.vhd")
    else if r == 7 && refs then [ (directRef "${key}/x" earlier) { inner = derived "${key}/y" earlier; } ]
    else "plain";

  tree = key: depth: earlier:
    listToAttrs (genList (j:
      let k = pick "${key}/key${toString j}" attrKeys; in
      { name = if k == "__not" then "not__" else k; value = value "${key}/v${toString j}" depth earlier; })
      (rand "${key}/width" 4));

  # Group i: one node, a count, or a forEach, each possibly a data source.
  group = gk: i: earlier:
    let
      k = "${gk}/g${toString i}";
      isData = chance "${k}/data" 20;
      mk = if isData then lib.mkData else lib.mkResource;
      spec = ik: {
        provider = pick "${k}/provider" providerIds;
        type = "t_${toString (rand "${k}/type" 3)}";
        name = "r${toString i}";
        config = tree "${k}/${ik}/config" 0 earlier;
        dependsOn =
          if earlier != [ ] && chance "${k}/${ik}/dep" 30 then
            let d = pick "${k}/${ik}/depon" earlier; in [ (if chance "${k}/${ik}/depstr" 50 then d.id else d) ]
          else [ ];
      } // (if !isData && chance "${k}/lifecycle" 30 then {
        lifecycle = {
          preventDestroy = chance "${k}/pd" 50;
          createBeforeDestroy = chance "${k}/cbd" 50;
          ignoreChanges = pick "${k}/ic" [ [ ] [ "*" ] [ "tags" [ "tags" "a.b" ] "list[0].x" ] [ [ "deep" 0 "with space" ] ] ];
        };
      } else { });
      shape = rand "${k}/shape" 4;
      keys = genList (j: pick "${k}/key${toString j}" instanceKeys) (1 + rand "${k}/nkeys" 3);
    in
    if shape == 2 then lib.count (1 + rand "${k}/count" 3) (j: mk (spec "c${toString j}"))
    else if shape == 3 then lib.forEach keys (key: _: mk (spec "k${key}"))
    else [ (mk (spec "one")) ];

  variableDecls = {
    region = { type = "string"; default = "eu"; description = "where"; };
    replicas = { type = "number"; default = 1; };
    debug = { type = "bool"; default = false; sensitive = false; };
    zones = { type = "list"; default = [ "a" ]; };
    labels = { type = "map"; default = { }; };
    anything = { default = null; };
  };

  graph = g:
    let
      gk = "${seed}/${toString g}";
      nGroups = 1 + rand "${gk}/groups" 10;
      groups = foldl' (acc: i: acc ++ [ (group gk i (concatLists acc)) ]) [ ] (genList (i: i) nGroups);
      nodes = concatLists groups;
      managed = builtins.filter (n: n.kind == "managed") nodes;
      dataNodes = builtins.filter (n: n.kind == "data") nodes;
      applied = builtins.filter (n: chance "${gk}/applied/${n.id}" 50) nodes;
      ledgerOf = ns: {
        phase = 1;
        secretsFile = channelFor (map (n: n.id) ns);
        outputs = listToAttrs (map (n: { name = n.id; value = outputsFor n.id; }) ns);
        vars = if chance "${gk}/vars" 50 then { region = "us"; replicas = 3; } else { };
      };
      variables = listToAttrs (builtins.filter (v: chance "${gk}/var/${v.name}" 50)
        (map (name: { inherit name; value = variableDecls.${name}; }) (builtins.attrNames variableDecls)));
      consumers = listToAttrs (genList (j: {
        name = "c${toString j}";
        value = value "${gk}/consumer${toString j}" 0 nodes;
      }) (rand "${gk}/consumers" 3));
      providers = listToAttrs (map (p: {
        name = p;
        value = lib.mkProvider ({
          source = "provider-${toString (rand "${gk}/src/${p}" 9)}";
          config = if nodes != [ ] && chance "${gk}/pcfg/${p}" 30 then { token = (builtins.head nodes).refAttr "value"; } else { };
        } // (if chance "${gk}/pver/${p}" 50 then { version = "1.0.${toString (rand "${gk}/v/${p}" 9)}"; } else { }));
      }) providerIds);
      plan = ledger: lib.toIR { inherit providers consumers variables ledger; resources = managed; data = dataNodes; };
    in
    {
      name = "graph-${toString g}";
      nodeIds = map (n: n.id) nodes;
      partialLedger = ledgerOf applied;
      partial = plan (ledgerOf applied);
      full = plan (ledgerOf nodes);
    };
in
genList graph graphs

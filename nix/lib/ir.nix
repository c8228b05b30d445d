# toIR: turn providers, resources, data sources and consumers into the IR
# (docs/IR-CONTRACT.md), resolving references against the outputs ledger.
{ names, values, nodes, vars, conditions }:
let
  inherit (builtins)
    all any attrNames attrValues concatMap elem elemAt filter foldl' genList groupBy head isAttrs
    isList length listToAttrs mapAttrs seq substring throw typeOf;

  inherit (values) lookup resolveItem;

  flatten = x: if isList x then concatMap flatten x else [ x ];

  reserved = k: substring 0 2 k == "__";

  # Whether walking `x` would rebuild it unchanged: data with nothing for toIR to resolve or
  # refuse (no references, derived values, secrets, resources, derivations, functions,
  # reserved names; no string with store paths inside a secret's computation). The walk then
  # keeps the value itself instead of a copy: a large plan's configs are mostly such data,
  # and their copies (with the walk's intermediate sets) were most of Nix's memory.
  # One closure per `secret` (isPlainIn false and true are made once): each value it looks
  # at costs one call, with primop type tests and no bindings of its own.
  isPlainIn = secret: if secret then plainInSecret else plainData;
  plainData = plainCheck false;
  plainInSecret = plainCheck true;
  plainCheck = secret:
    let
      go = x:
        if isAttrs x then
          !(x ? _type || x ? outPath || x ? __toString || x ? __build || (x.type or null) == "derivation")
          && all (k: substring 0 2 k != "__" && go x.${k}) (attrNames x)
        else if isList x then all go x
        else if builtins.isFunction x then false
        else if builtins.isString x then !(secret && builtins.hasContext x)
        else true;
    in
    go;

  # Walk a config tree. Returns { v = IR value; e = [ { from; via; ref?; } ]; } where e
  # lists the nodes this tree depends on and the attribute path of each use (with the
  # output path read, for a plain reference).
  # ctx = { outputs; channel; declared; owner; root; secret ? false; } where secret is
  # set inside a value computed from a secret.
  walk = ctx: path: x:
    let t = typeOf x; in
    if isPlainIn (ctx.secret or false) x then { v = x; e = [ ]; }
    else if t == "set" then walkSet ctx path x
    else if t == "list" then
      let rs = genList (i: walk ctx (path ++ [ i ]) (elemAt x i)) (length x); in
      { v = map (r: r.v) rs; e = concatMap (r: r.e) rs; }
    else if t == "lambda" then fail ctx path "is a function; config values must be data"
    else if t == "string" && (ctx.secret or false) && builtins.hasContext x then
      fail ctx path "was computed from a secret but refers to store paths (${builtins.concatStringsSep ", " (attrNames (builtins.getContext x))}): a secret must not go into a derivation, whose files are world-readable in the Nix store. Nivis evaluates with a private store (~/.cache/nivis/eval-store, mode 0700), so the derivation did not reach /nix/store; evaluated without Nivis (plain nix eval), its .drv is in the store: delete it and rotate the secret"
    else { v = x; e = [ ]; };

  # A value computed from a secret: { __sensitive = { value; }; }. Derivations are
  # refused before anything forces them (forcing one writes its .drv into the store).
  sensitiveValue = ctx: path: value:
    let w = walk (ctx // { secret = true; }) path value; in
    { v = { __sensitive = { value = w.v; }; }; e = w.e; };

  # A value computed from an ephemeral result: { __ephemeral = { value; }; }, refused in a
  # derivation like a secret.
  ephemeralValue = ctx: path: value:
    let w = walk (ctx // { secret = true; }) path value; in
    { v = { __ephemeral = { value = w.v; }; }; e = w.e; };

  isEphemeralId = ctx: id: (ctx.ephemeral or { }) ? ${id};

  fail = ctx: path: msg: throw "nivis: ${ctx.owner}: ${names.showAt ctx.root path} ${msg}";

  checkRef = ctx: path: ref:
    if ctx.declared ? ${ref.resource} || isEphemeralId ctx ref.resource then ref
    else fail ctx path "refers to ${ref.resource}, which is not in toIR's resources or data${if ctx ? ephemeral && ctx.ephemeral != { } then " (nor ephemeral)" else ""}";

  walkSet = ctx: path: x:
    let kind = x._type or null; in
    if kind == "nivis:ref" && isEphemeralId ctx x.resource then
      # The executor cannot read an ephemeral result: it reaches a config only through Nix.
      walkSet ctx path (values.mkDerived [ x ] builtins.head)
    else if kind == "nivis:ref" then
      let
        ref = checkRef ctx path x;
        r = lookup ctx.outputs ref;
        marker = { inherit (ref) resource path; };
      in
      {
        v =
          if r.state == "known" then r.value
          else if r.state == "sensitive" then { __sensitiveRef = marker; }
          else { __ref = marker; };
        # `ref` tells the executor which output the value at `via` reads, so it can
        # resolve it itself when the target changes within a phase (TF→TF).
        e = [ { from = ref.resource; via = names.renderPath path; ref = ref.path; } ];
      }
    else if kind == "nivis:secret" then sensitiveValue ctx path x.value
    else if kind == "nivis:derived" then
      let
        r = resolveItem { inherit (ctx) outputs channel; ephemeral = ctx.ephemeral or { }; checkRef = checkRef ctx path; at = "${ctx.owner}: ${names.showAt ctx.root path}"; } x;
        # Ephemeral resources are no graph nodes: no edge, the value waits for Nix.
        froms = filter (id: !(isEphemeralId ctx id))
          (attrNames (listToAttrs (map (ref: { name = ref.resource; value = null; }) r.refs)));
        # `reads`: the outputs of `from` the computation read, so the executor defers it
        # only when one of those may change (not when another output of `from` does).
        edges = map (from: {
          inherit from;
          via = names.renderPath path;
          reads = map (ref: ref.path) (filter (ref: ref.resource == from) r.refs);
        }) froms;
        inputs = attrNames (listToAttrs (map (ref: { name = values.refInput ref; value = null; }) r.refs));
      in
      if r.known && (r.ephemeral or false) then let w = ephemeralValue ctx path r.value; in { v = w.v; e = edges ++ w.e; }
      else if r.known && r.sensitive then let w = sensitiveValue ctx path r.value; in { v = w.v; e = edges ++ w.e; }
      else if r.known then let w = walk ctx path r.value; in { v = w.v; e = edges ++ w.e; }
      else { v = { __derived = { inherit inputs; }; }; e = edges; }
    else if kind == "nivis:resource" then
      fail ctx path "is the whole resource ${x.id}; use one of its outputs, e.g. (${x.name}.refAttr \"id\")"
    else if kind == "nivis:provider" then fail ctx path "is a provider; providers belong in toIR's providers"
    else if (ctx.secret or false) && ((x.type or null) == "derivation" || x ? __build || x ? outPath) then
      fail ctx path "is a derivation (or a build output) computed from a secret: the secret would be written into the world-readable Nix store. Pass the secret to a resource instead, and build without it"
    else if x ? __build && attrNames x == [ "__build" ] then { v = x; e = [ ]; }
    else if (x.type or null) == "derivation" then { v = nodes.drv x; e = [ ]; }
    else if x ? outPath || x ? __toString then { v = toString x; e = [ ]; }
    else
      let
        bad = filter reserved (attrNames x);
        rs = mapAttrs (k: v: walk ctx (path ++ [ k ]) v) x;
      in
      if bad != [ ] then
        fail ctx (path ++ [ (head bad) ]) "uses a reserved name: attribute names starting with '__' are IR markers; use refAttr, str, compute or drv"
      else { v = mapAttrs (_: r: r.v) rs; e = concatMap (r: r.e) (attrValues rs); };

  # One edge per (from, via) pair, in a stable order.
  dedupe = es: attrValues (listToAttrs (map (e: { name = "${e.from} ${e.via}"; value = e; }) es));

  # The lifecycle of a node that sets none, one set shared by all of them.
  defaultLifecycle = { preventDestroy = false; createBeforeDestroy = false; ignoreChanges = [ ]; };
  # The meta of a node without dependsOn, lifecycle or importId: one set shared by all of them
  # (a large plan's IR nodes stay alive until the whole IR is printed).
  defaultManagedMeta = { dependsOn = [ ]; lifecycle = defaultLifecycle; };
  defaultDataMeta = { dependsOn = [ ]; };
  # What toIR's plainNodeIR takes from a node, and what it adds.
  irNodeKeys = { id = null; type = null; name = null; provider = null; config = null; module = null; key = null; };
  plainManagedMeta = { meta = defaultManagedMeta; };

  # `pending`: the outputs the preconditions not known yet read (conditions.preconditions).
  # `triggers`: the IR entries of its replaceTriggeredBy (conditions.triggers).
  lifecycleIR = owner: l: pending: triggers:
    if l == { } then defaultLifecycle
    else
      let
        unknown = filter (k: !elem k conditions.lifecycleKeys) (attrNames l);
        flag = k:
          let v = l.${k} or false; in
          if builtins.isBool v then v else throw "nivis: ${owner}: lifecycle.${k} must be a bool, got ${names.describe v}";
        path = p:
          let s = if isList p then names.renderPath p else p; in
          if builtins.isString s && names.isAttrPath s then s
          else throw "nivis: ${owner}: lifecycle.ignoreChanges entry ${builtins.toJSON p} is not an attribute path such as \"tags.env\", \"disk[0].size\" or \"*\"";
        ignore = l.ignoreChanges or [ ];
      in
      if unknown != [ ] then throw "nivis: ${owner}: unknown lifecycle field '${head unknown}' (expected ${builtins.concatStringsSep ", " conditions.lifecycleKeys})"
      else if !isList ignore then throw "nivis: ${owner}: lifecycle.ignoreChanges must be a list of attribute paths"
      else {
        preventDestroy = flag "preventDestroy";
        createBeforeDestroy = flag "createBeforeDestroy";
        ignoreChanges = map path ignore;
        ${if pending == [ ] then null else "preconditionPending"} = { __derived = { inputs = pending; }; };
        ${if triggers == [ ] then null else "replaceTriggeredBy"} = triggers;
      };

  toIR =
    args@{ providers ? { }
    , resources ? [ ]
    , data ? [ ]
    , consumers ? { }
    , variables ? { }
    , moved ? [ ]
    , ephemeral ? [ ]
    , checks ? [ ]
    , removed ? [ ]
    , ledger ? { }
    }:
    let
      outputs = if isAttrs ledger && isAttrs (ledger.outputs or null) then ledger.outputs else { };
      channel = values.channel ledger;

      providerIR = mapAttrs (id: p0:
        let
          p = if nodes.isProvider p0 then p0 else nodes.mkProvider p0;
          ctx = { inherit outputs channel declared; ephemeral = ephemeralIds; owner = "provider ${id}"; root = "config"; };
        in
        if !names.isProviderId id then throw "nivis: provider id '${id}' may only contain letters, digits, '_', '-', '.' and '/'"
        else { inherit (p) source; config = (walk ctx [ ] p.config).v; }
          // (if p.version == null then { } else { inherit (p) version; })
          // (if (p.drvPath or null) == null then { } else { inherit (p) drvPath; })
          // (if p.kind == "nixops4" then { inherit (p) kind statelessTypes; } else { })) providers;

      # The nodes of one section, flattened; a wrong item throws when its element is forced.
      # A list that holds nothing to flatten and only nodes of the section's kind is kept
      # as it is (the common case: a plan's own list, or lib.count's).
      collect = section: kind: xs:
        let items = if isList xs && !(any isList xs) then xs else flatten xs; in
        if all (n: isAttrs n && (n._type or null) == "nivis:resource" && n.kind == kind) items then items
        else genList (i:
          let n = elemAt items i; in
          if nodes.isNode n && n.kind == kind then n
          else if nodes.isNode n then
            throw "nivis: toIR: ${n.id} is ${if n.kind == "managed" then "a managed resource; list it in resources" else if n.kind == "ephemeral" then "an ephemeral resource; list it in ephemeral" else "a data source; list it in data"}"
          else throw "nivis: toIR: ${section}[${toString i}] is ${names.describe n}, not a ${if kind == "managed" then "resource made with mkResource" else if kind == "ephemeral" then "resource made with mkEphemeral" else "data source made with mkData"}")
          (length items);

      managed = collect "resources" "managed" resources;
      dataNodes = collect "data" "data" data;
      ephemeralNodes = collect "ephemeral" "ephemeral" ephemeral;
      allNodes = managed ++ dataNodes;

      # Id -> the nodes with that id (one, unless duplicated); only its names are used.
      # groupBy makes no {name; value} set per node, as listToAttrs would need.
      declared = groupBy (n: n.id) allNodes;
      ephemeralIds = groupBy (n: n.id) ephemeralNodes;
      duplicates =
        # attrValues, not attrNames: it makes no new value per name.
        if length (attrValues declared) + length (attrValues ephemeralIds) == length allNodes + length ephemeralNodes then [ ]
        else
          let everyNode = allNodes ++ ephemeralNodes; in
          filter (id: length (groupBy (n: n.id) everyNode).${id} > 1) (attrNames (declared // ephemeralIds));

      ownerOf = n: if n.kind == "managed" then "resource ${n.id}" else "data source ${n.id}";

      # Per node, in allNodes' order: null for a node without edges whose config is plain
      # data (its config is its own IR: no walk, and no walk context built for it);
      # otherwise { node; w; }, w its walked config or null for a plain one. One list for the
      # edges' and the resources' pass, so a config is walked once and no per-node pair of
      # results is kept between the passes.
      # The common node (plain config, no dependsOn, no precondition) is told apart without a
      # binding of its own: no environment or thunk per node for it (DESIGN §98: measured).
      walked = map (n:
        if plainData n.config && n.dependsOn == [ ]
          && !(n.kind == "managed" && isAttrs n.lifecycle
            && (n.lifecycle ? precondition || n.lifecycle ? replaceTriggeredBy)) then null
        else walkedEntry n)
        allNodes;
      walkedEntry = n:
        let pre = preconditionsOf n; trig = triggersOf n; in
        if plainData n.config then { node = n; w = null; inherit pre trig; }
        else { node = n; w = walk { inherit outputs channel declared; owner = ownerOf n; ephemeral = ephemeralIds; root = "config"; } [ ] n.config; inherit pre trig; };

      # A managed node's preconditions (conditions.preconditions), or null without any.
      preconditionsOf = n:
        if n.kind != "managed" || !(isAttrs n.lifecycle && n.lifecycle ? precondition) then null
        else conditions.preconditions (ownerOf n) (i: c:
          walk { inherit outputs channel declared; owner = ownerOf n; ephemeral = ephemeralIds; root = "lifecycle.precondition[${toString i}].condition"; } [ ] c)
          n.lifecycle.precondition;
      # A managed node's replaceTriggeredBy (conditions.triggers), or null without any.
      triggersOf = n:
        if n.kind != "managed" || !(isAttrs n.lifecycle && n.lifecycle ? replaceTriggeredBy) then null
        else conditions.triggers (ownerOf n) n.id
          (id: declared ? ${id} && (head declared.${id}).kind == "managed")
          n.lifecycle.replaceTriggeredBy;
      # The common case of a large plan: no node has edges or a config to walk (forced by the
      # resources, printed after the edges, which force every entry anyway).
      noneWalked = all builtins.isNull walked;

      depsOf = n: map (d:
        let id = if nodes.isNode d then d.id else d; in
        if builtins.isString id && declared ? ${id} then id
        else throw "nivis: ${ownerOf n}: dependsOn entry ${if builtins.isString id then id else names.describe id} is not in toIR's resources or data")
        n.dependsOn;

      # `x`: the node's entry in `walked`.
      nodeIR = x: n: {
        inherit (n) id type name;
        ${if n ? module then "module" else null} = n.module;
        # lib.count's index or lib.forEach's key: the instances of one call are one block.
        ${if n ? key then "key" else null} = n.key;
        provider =
          if !(providers ? ${n.provider}) then
            throw "nivis: ${ownerOf n}: provider '${n.provider}' is not declared in toIR's providers (declared: ${builtins.concatStringsSep ", " (attrNames providers)})"
          else if n.kind == "data" && (providerIR.${n.provider}.kind or "tfplugin") == "nixops4" then
            throw "nivis: ${ownerOf n}: provider '${n.provider}' is of kind nixops4, which has no data sources"
          else n.provider;
        config = if x == null || x.w == null then n.config else x.w.v;
        meta =
          if n.dependsOn == [ ] && n.lifecycle == { } && (n.importId or null) == null then
            (if n.kind == "managed" then defaultManagedMeta else defaultDataMeta)
          # One set (an attribute whose name is null is left out), not one per `//`.
          else {
            dependsOn = depsOf n;
            ${if n.kind == "managed" then "lifecycle" else null} =
              lifecycleIR (ownerOf n) n.lifecycle
                (if x == null || x.pre or null == null then [ ] else x.pre.pending)
                (if x == null || x.trig or null == null then [ ] else x.trig.ir);
            ${if (n.importId or null) == null then null else "importId"} = n.importId;
          };
      };

      # The IR of a managed node in a plan where noneWalked holds: its own id, type, name,
      # provider and config (the node's values themselves, no thunk of its own) and the
      # shared meta, unless it has a lifecycle or importId or its provider is not declared
      # (nodeIR then builds it, or says what is wrong). The IR nodes of a large plan all
      # stay alive until the whole IR is printed.
      plainNodeIR = n:
        if providers ? ${n.provider} && n.lifecycle == { } && (n.importId or null) == null
        then builtins.intersectAttrs irNodeKeys n // plainManagedMeta
        else nodeIR null n;

      # The edges of a node's entry in `walked`.
      edgesOf = x:
        let n = x.node; w = x.w; in
        if (w == null || w.e == [ ]) && n.dependsOn == [ ] && x.pre == null && x.trig == null then [ ]
        else map (e: {
          inherit (e) from via;
          to = n.id;
          ${if e ? ref then "ref" else null} = e.ref;
          ${if e ? reads then "reads" else null} = e.reads;
        }) (dedupe ((if w == null then [ ] else w.e) ++ (if x.pre == null then [ ] else x.pre.edges)
          ++ (if x.trig == null then [ ] else x.trig.edges))
          ++ map (d: { from = d; via = "dependsOn"; }) (depsOf n));

      # Ephemeral resources: no edges (they are not graph nodes), no meta.
      ephemeralIR = map (n:
        let
          provider =
            if providers ? ${n.provider} then n.provider
            else throw "nivis: ephemeral resource ${n.id}: provider '${n.provider}' is not declared in toIR's providers";
          ctx = { inherit outputs channel declared; ephemeral = ephemeralIds; owner = "ephemeral resource ${n.id}"; root = "config"; };
        in
        { inherit (n) id type name; inherit provider; config = (walk ctx [ ] n.config).v; })
        ephemeralNodes;
      nManaged = length managed;

      consumerIR = map (id:
        if !names.isConsumerId id then throw "nivis: toIR: consumer id '${id}' may only contain letters, digits, '_', '-' and '.'"
        else {
          inherit id;
          value = (walk { inherit outputs channel declared; ephemeral = ephemeralIds; owner = "consumer ${id}"; root = "value"; } [ ] consumers.${id}).v;
        }) (attrNames consumers);

      variablesIR = vars.toIR variables;
      # Every declared variable must have a value of its type, used or not.
      varsChecked = foldl' (acc: v: seq v acc) true (attrValues (vars.vars ledger variables));

      movedIR = map (m:
        if nodes.isMoved m then { inherit (m) from to; }
        else throw "nivis: toIR: moved entries must be made with lib.moved, got ${names.describe m}")
        (flatten moved);

      # Postconditions (against the recorded outputs) and checks: the executor reports them.
      conditionsIR =
        concatMap (n:
          if isAttrs n.lifecycle && n.lifecycle ? postcondition
          then conditions.postconditions (ownerOf n) n.id outputs n.lifecycle.postcondition
          else [ ]) managed
        ++ conditions.checks (c:
          walk { inherit outputs channel declared; ephemeral = ephemeralIds; owner = "check ${c.name}"; root = "assert"; } [ ] c.condition)
          (flatten checks);

      removedIR = map (r:
        if !nodes.isRemoved r then throw "nivis: toIR: removed entries must be made with lib.removed, got ${names.describe r}"
        else if declared ? ${r.from} then
          throw "nivis: toIR: ${r.from} is in removed but still declared; drop the resource from the plan (or the removed entry)"
        else { inherit (r) from destroy; })
        (flatten removed);
      removedTwice = filter (f: length (filter (r: r.from == f) removedIR) > 1) (map (r: r.from) removedIR);

      ir = {
        schemaVersion = 1;
        providers = providerIR;
        resources =
          if noneWalked then map plainNodeIR managed
          else genList (i: nodeIR (elemAt walked i) (elemAt managed i)) nManaged;
        # Printed first (names in order): forces only the data nodes' entries, as before.
        data = genList (i: nodeIR (elemAt walked (nManaged + i)) (elemAt dataNodes i)) (length dataNodes);
        edges = concatMap (x: if x == null then [ ] else edgesOf x) walked;
        nixConsumers = consumerIR;
        variables = variablesIR;
      } // (if movedIR == [ ] then { } else { moved = movedIR; })
        // (if conditionsIR == [ ] then { } else { conditions = conditionsIR; })
        // (if removedIR == [ ] then { } else { removed = removedIR; })
        // (if ephemeralIR == [ ] then { } else { ephemeral = ephemeralIR; })
        # A forgotten `inherit ledger;`: the executor refuses a plan that needs Nix to see
        # outputs (it would half-apply and then wait forever).
        // (if args ? ledger then { } else { withoutLedger = true; });
    in
    if !isAttrs providers then throw "nivis: toIR: providers must be an attrset of mkProvider values"
    else if !isAttrs consumers || nodes.isNode consumers then throw "nivis: toIR: consumers must be an attrset id -> value"
    else if removedTwice != [ ] then throw "nivis: toIR: ${head removedTwice} is in removed twice"
    else if duplicates != [ ] then
      throw "nivis: toIR: duplicate resource id ${head duplicates} (ids must be unique across resources and data)"
    # `nivis why` asks (ledger.positions = true, in an evaluation of its own) where each
    # node and config attribute was written, instead of the IR.
    else if isAttrs ledger && (ledger.positions or false) == true then
      { positions = listToAttrs (map (n: { name = n.id; value = nodes.positions n; }) allNodes); }
    # After a failed evaluation the executor asks (ledger.variablesOnly = true) for the
    # declarations alone, to learn which variables are sensitive without forcing (and
    # failing on) their values or anything else.
    else if isAttrs ledger && (ledger.variablesOnly or false) == true then
      { variables = variablesIR; }
    else seq varsChecked ir;
in
{
  inherit toIR walk;
}

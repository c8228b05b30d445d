# Constructors for providers, resources, data sources and build outputs, plus the
# count / forEach expansion helpers. Expansion happens here, in Nix: the IR only
# ever contains concrete instances named <name>__<key>.
{ names, values }:
let
  inherit (builtins)
    all attrNames elem filter genList head isAttrs isFunction isInt isList isPath
    isString length listToAttrs substring throw unsafeDiscardStringContext;

  isNode = x: isAttrs x && (x._type or null) == "nivis:resource";
  isProvider = x: isAttrs x && (x._type or null) == "nivis:provider";

  hasPrefix = p: s: substring 0 (builtins.stringLength p) s == p;

  # kind: the protocol the binary speaks. "tfplugin" (default): go-plugin + tfplugin5/6.
  # "nixops4": the NixOps4 resource provider protocol v0; no version, no config, and
  # statelessTypes lists the types that are re-created instead of updated.
  mkProvider = args:
    let
      unknown = filter (k: !elem k [ "source" "version" "config" "kind" "statelessTypes" ]) (attrNames args);
      given = args.source or null;
      # A package (a derivation, or lib.drv of one): its out path, built before the provider
      # starts (the IR carries the derivation as drvPath).
      built =
        if isAttrs given && given ? __build then given.__build
        else if isAttrs given && (given.type or null) == "derivation" then (drv given).__build
        else null;
      source =
        if built != null then built.path
        else if isPath given then toString given
        else given;
      kind = args.kind or "tfplugin";
      nixops4 = kind == "nixops4";
      stateless = args.statelessTypes or [ ];
      label = "mkProvider ${if isString source then source else "?"}";
    in
    if !isAttrs args then throw "nivis: mkProvider expects an attrset { source; version ? null; config ? {}; kind ? \"tfplugin\"; }"
    else if unknown != [ ] then throw "nivis: mkProvider: unknown argument '${head unknown}' (expected source, version, config, kind, statelessTypes)"
    else if !(isString source) || source == "" then
      throw "nivis: mkProvider: 'source' must be a non-empty string, a path or a package (a registry address, a binary name, a path, or a derivation / lib.drv of one)"
    else if !elem kind [ "tfplugin" "nixops4" ] then
      throw "nivis: ${label}: 'kind' must be \"tfplugin\" (the default) or \"nixops4\", got ${names.describe kind}"
    else if (args.version or null) != null && !isString args.version then
      throw "nivis: ${label}: 'version' must be a string"
    else if nixops4 && (args.version or null) != null then
      throw "nivis: ${label}: a nixops4 provider has no version; give its binary as 'source'"
    else if !isAttrs (args.config or { }) then
      throw "nivis: ${label}: 'config' must be an attrset"
    else if nixops4 && (args.config or { }) != { } then
      throw "nivis: ${label}: a nixops4 provider takes no configuration (protocol v0 has none)"
    else if args ? statelessTypes && !nixops4 then
      throw "nivis: ${label}: 'statelessTypes' is only for kind = \"nixops4\""
    else if !isList stateless || !all names.isIdent stateless then
      throw "nivis: ${label}: 'statelessTypes' must be a list of resource type names such as [ \"file\" ]"
    else {
      _type = "nivis:provider";
      inherit source kind;
      drvPath = if built != null then built.drvPath or null else null;
      version = args.version or null;
      config = args.config or { };
      statelessTypes = stateless;
    };

  checkPath = id: path:
    let
      n = if isList path then length path else 0;
      bad = filter (i:
        let s = builtins.elemAt path i; in
        !(if i == 0 then names.isAttrName s else isString s || (isInt s && s >= 0))) (genList (i: i) n);
    in
    if n == 0 then throw "nivis: ${id}.ref expects a non-empty list path such as [ \"net\" 0 \"ip\" ]"
    else if bad != [ ] then
      let i = head bad; in
      throw "nivis: ${id}.ref: path element ${toString i} is ${names.describe (builtins.elemAt path i)}; ${
        if i == 0 then "the first element is an output attribute name (letters, digits, '_' or '-')"
        else "elements are attribute names (strings) or list indices (integers >= 0)"}"
    else path;

  # The arguments each kind of node takes (one list per kind, shared by every node).
  allowedArgs = {
    managed = [ "provider" "type" "name" "config" "dependsOn" "lifecycle" "importId" ];
    data = [ "provider" "type" "name" "config" "dependsOn" ];
    ephemeral = [ "provider" "type" "name" "config" ];
  };

  # The id of a node made by mkResource / mkData / mkEphemeral from `args` (`name`: the
  # node's name, args.name or an instance's <name>__<key>), or the throw saying what is
  # wrong with `args`. Its own function: the checks' intermediate values die with the
  # call instead of living in every node (a plan of 100k nodes keeps them all). The
  # common case (valid arguments, a config without `_type`) is one expression that binds
  # nothing; anything else goes through nodeProblem, whose checks it mirrors.
  nodeId = kind: args: name:
    if isAttrs args
      # No argument but the allowed ones: counted, which allocates nothing but one list.
      && length (builtins.attrValues args)
        == (if args ? provider then 1 else 0) + (if args ? type then 1 else 0)
        + (if args ? name then 1 else 0) + (if args ? config then 1 else 0)
        + (if kind != "ephemeral" && args ? dependsOn then 1 else 0)
        + (if kind == "managed" && args ? lifecycle then 1 else 0)
        + (if kind == "managed" && args ? importId then 1 else 0)
      && names.isProviderId (args.provider or null)
      && names.isIdent (args.type or null)
      && names.isIdent name
      && (let c = args.config or { }; in isAttrs c && !(c ? _type))
      && isList (args.dependsOn or [ ])
      && isAttrs (args.lifecycle or { })
      && isString (args.importId or "x") && (args.importId or "x") != ""
    then "${if kind == "managed" then "" else "${kind}."}${args.provider}.${args.type}.${name}"
    else nodeProblem kind args name;

  # nodeId's checks one by one, with the message for the first that fails.
  nodeProblem = kind: args: name:
    let
      managed = kind == "managed";
      ephemeral = kind == "ephemeral";
      fn = if managed then "mkResource" else if ephemeral then "mkEphemeral" else "mkData";
      unknown = filter (k: !elem k allowedArgs.${kind}) (attrNames args);
      part = k: let v = if isAttrs args then args.${k} or null else null; in if isString v then v else "?";
      label = "${fn} ${part "provider"}.${part "type"}.${if isString name then name else "?"}";
      hint = k:
        if elem k [ "count" "forEach" "for_each" ] then "; expand instances with lib.count or lib.forEach"
        else if ephemeral && k == "dependsOn" then "; an ephemeral resource is opened when its config is known"
        else if k == "lifecycle" then "; ${if ephemeral then "ephemeral resources" else "data sources"} have no lifecycle"
        else if k == "importId" then "; data sources are read, not imported"
        else "";
      problem =
        if !isAttrs args then "expects an attrset { provider; type; name; config ? {}; ... }"
        else if unknown != [ ] then "unknown argument '${head unknown}'${hint (head unknown)}"
        else if !names.isProviderId (args.provider or null) then
          "'provider' must be a provider id declared in toIR's providers (letters, digits, '_', '-', '.', '/'), got ${names.describe (args.provider or null)}"
        else if !names.isIdent (args.type or null) then
          "'type' must be a resource type name such as \"alpha_token\", got ${names.describe (args.type or null)}"
        else if !names.isIdent name then
          "'name' must start with a letter or '_' and contain only letters, digits, '_' and '-', got ${names.describe name}"
        else if !isAttrs (args.config or { }) || isNode (args.config or { }) || values.isDeferred (args.config or { }) then
          "'config' must be an attrset"
        else if !isList (args.dependsOn or [ ]) then "'dependsOn' must be a list of resources or ids"
        else if !isAttrs (args.lifecycle or { }) then "'lifecycle' must be an attrset"
        else if (args.importId or "x") == "" || !isString (args.importId or "x") then
          "'importId' must be the provider's id of an existing object (a non-empty string), got ${names.describe (args.importId or null)}"
        else null;
    in
    if problem == null then (if managed then "" else "${kind}.") + "${args.provider}.${args.type}.${name}"
    else throw "nivis: ${label}: ${problem}";

  # One function for every node, so a plan's nodes share it instead of each holding a closure.
  nodeToString = self: throw
    "nivis: ${self.id} is a resource, not a value; reference one of its outputs with .refAttr \"<attribute>\"";

  # mkResource / mkData share everything but the id prefix and lifecycle. `base`: the
  # node's name, args.name, or for an instance the name of the node it renames (`args`
  # stays the caller's set, not a copy with another name). `key`: an instance's key
  # (lib.count / lib.forEach), an attribute of the node unless null; an instance is named
  # <base>__<key>. The node holds only its attributes' thunks: each of a large plan's nodes
  # stays alive until the IR is printed.
  # `module`: the address prefix of a module instance ("module.db.eu"), or null; an instance's
  # node is `<module>.<provider>.<type>.<name>` (data sources: `data.<module>.…`).
  mkNodeKeyed = mkNodeIn null;
  mkNodeIn = module: kind: args: base: key:
    let
      name = if key == null then base else "${base}__${toString key}";
      flat = nodeId kind args name;
      self = {
        _type = "nivis:resource";
        inherit kind name;
        id =
          if module == null then flat
          else if kind == "managed" then "${module}.${flat}"
          else "${kind}.${module}.${substring (builtins.stringLength kind + 1) (builtins.stringLength flat) flat}";
        inherit (args) provider type;
        config = args.config or { };
        dependsOn = args.dependsOn or [ ];
        lifecycle = args.lifecycle or { };
        # Only when given (readers say `n.importId or null`): no thunk per node without one.
        ${if args ? importId then "importId" else null} = args.importId;
        # A reference to one output attribute: (vm.refAttr "ip").
        refAttr = attr:
          if names.isAttrName attr then values.mkRef self.id [ attr ]
          else throw "nivis: ${self.id}.refAttr expects an output attribute name, got ${names.describe attr}";
        # A reference into nested outputs: (vm.ref [ "net" 0 "ip" ]).
        ref = path: values.mkRef self.id (checkPath self.id path);
        _args = args;
        __toString = nodeToString;
        ${if key == null then null else "key"} = key;
        ${if module == null then null else "module"} = module;
      };
    in
    self;

  # The constructors of a module instance: the same as mkResource / mkData / mkEphemeral,
  # their nodes' ids prefixed with `module` (lib.modules gives them to an instance's modules).
  constructorsIn = module: {
    mkResource = args: mkNodeIn module "managed" args (args.name or null) null;
    mkData = args: mkNodeIn module "data" args (args.name or null) null;
    mkEphemeral = args: mkNodeIn module "ephemeral" args (args.name or null) null;
  };

  mkResource = args: mkNodeKeyed "managed" args (args.name or null) null;
  mkData = args: mkNodeKeyed "data" args (args.name or null) null;
  # An ephemeral resource: opened by the executor for one run, its result never stored;
  # usable (refAttr, str, compute) only in write-only attributes, provider configurations
  # and other ephemeral resources' configurations.
  mkEphemeral = args: mkNodeKeyed "ephemeral" args (args.name or null) null;

  # Rename one expanded instance to <name>__<key> and remember its key (`key` is known to
  # make a valid name: count's decimal indices always do, forEach checks its keys). What
  # the instance takes from `r` is forced here, so that nothing of the instance refers
  # to `r`: the node the caller made is garbage as soon as the instance exists, instead
  # of living until the instance's name and id are forced (in a large plan, after every
  # instance was made: both nodes of every resource alive at once).
  instance = helper: key: r:
    if !isNode r then
      throw "nivis: lib.${helper}: the function must return one resource made with mkResource or mkData (key ${toString key}), got ${names.describe r}"
    else
      let
        kind = r.kind; args = r._args; base = r.name; module = r.module or null;
        made = mkNodeIn module kind args base key;
      in
      builtins.seq kind (builtins.seq args (builtins.seq base
        # A generated constructor's call site stays with each instance (see positions).
        (if r ? _site then made // { inherit (r) _site; } else made)));

  # forEach's keys become part of ids: each must be a valid instance key.
  checkedInstance = helper: key: r:
    if isNode r && !names.isInstanceKey key then
      throw "nivis: lib.${helper}: key ${builtins.toJSON key} of ${r.id} cannot be part of a resource id (use letters, digits, '_' or '-')"
    else instance helper key r;

  # lib.count 3 (i: mkResource { name = "web"; ... }) -> instances web__0, web__1, web__2
  count = n: f:
    if !isInt n || n < 0 then throw "nivis: lib.count expects a non-negative integer, got ${names.describe n}"
    else if !isFunction f then throw "nivis: lib.count: the second argument must be a function index -> resource"
    else genList (i: instance "count" i (f i)) n;

  # lib.forEach { a = 1; b = 2; } (key: value: mkResource { name = "web"; ... })
  #   -> instances web__a, web__b (sorted by key)
  # A list of strings works like a set: each element is both key and value.
  forEach = xs: f:
    let
      attrs =
        if isAttrs xs then xs
        else if isList xs then
          listToAttrs (map (k:
            if isString k then { name = k; value = k; }
            else throw "nivis: lib.forEach: list elements must be strings, got ${names.describe k}") xs)
        else throw "nivis: lib.forEach expects an attrset or a list of strings, got ${names.describe xs}";
    in
    if !isFunction f then throw "nivis: lib.forEach: the second argument must be a function key -> value -> resource"
    else map (k: checkedInstance "forEach" k (f k attrs.${k})) (attrNames attrs);

  # Instances from lib.count / lib.forEach as an attrset keyed by their key.
  byKey = instances:
    listToAttrs (map (r:
      if isNode r && r ? key then { name = toString r.key; value = r; }
      else throw "nivis: lib.byKey expects instances made by lib.count or lib.forEach") instances);

  # lib.moved { from = "alpha.alpha_token.old"; to = newResource; }: the object recorded
  # at `from` now belongs to `to` (a rename, or into/out of count/forEach). Either end
  # may be a resource made with mkResource or its id; toIR's `moved` takes a list.
  isMoved = x: isAttrs x && (x._type or null) == "nivis:moved";
  moved = args:
    let
      unknown = filter (k: !(elem k [ "from" "to" ])) (attrNames args);
      end = which:
        let x = args.${which}; in
        if isNode x && x.kind == "managed" then x.id
        else if isNode x then throw "nivis: lib.moved: ${which} is the data source ${x.id}; only managed resources move"
        else if isString x then x
        else throw "nivis: lib.moved: ${which} must be a resource made with mkResource or its id, got ${names.describe x}";
    in
    if !isAttrs args then throw "nivis: lib.moved expects { from; to; }, got ${names.describe args}"
    else if unknown != [ ] then throw "nivis: lib.moved: unknown field '${head unknown}' (expected from, to)"
    else if !(args ? from && args ? to) then throw "nivis: lib.moved needs both from and to"
    else { _type = "nivis:moved"; from = end "from"; to = end "to"; };

  # lib.removed { from = "alpha.alpha_token.old"; destroy = false; }: the object recorded at
  # `from` (no longer declared) leaves the state without a provider call (destroy = false), or
  # is destroyed (destroy = true, the default: what happens to any record the plan no longer
  # declares, now written down). List these in toIR's removed.
  isRemoved = x: isAttrs x && (x._type or null) == "nivis:removed";
  removed = args:
    let
      unknown = filter (k: !(elem k [ "from" "destroy" ])) (attrNames args);
      from = args.from or null;
      id = if isNode from && from.kind == "managed" then from.id else from;
    in
    if !isAttrs args then throw "nivis: lib.removed expects { from; destroy ? true; }, got ${names.describe args}"
    else if unknown != [ ] then throw "nivis: lib.removed: unknown field '${head unknown}' (expected from, destroy)"
    else if isNode from && from.kind != "managed" then
      throw "nivis: lib.removed: from is the ${from.kind} node ${from.id}; only managed resources are removed (data sources are never recorded for long)"
    else if !isString id || builtins.match "[A-Za-z0-9][A-Za-z0-9_./-]*[.][A-Za-z_][A-Za-z0-9_-]*[.][A-Za-z_][A-Za-z0-9_-]*" id == null then
      throw "nivis: lib.removed: from must be a resource id such as \"alpha.alpha_token.old\" (or a resource made with mkResource), got ${names.describe from}"
    else if !builtins.isBool (args.destroy or true) then
      throw "nivis: lib.removed ${id}: destroy must be a bool (false: forget the object, leave it as it is; true: destroy it)"
    else { _type = "nivis:removed"; from = id; destroy = args.destroy or true; };

  # Where a node was written, for `nivis why`: the position of its definition and of every
  # attribute of its config, nested plain attrsets included, keyed by rendered path
  # ({ file; line; column; } each; attributes Nix has no position for are left out). Only
  # evaluated when the ledger asks for positions (see toIR).
  # The definition is where the user wrote the node's `name` (then its `type`, `provider`),
  # never a line of this library: Nix knows where attributes were written, not where a
  # function was called, so the arguments a `nivis gen` constructor was called with
  # (`_site`, kept by typecheck.construct) come first, and a helper that merges the caller's
  # set into mkResource's argument points at its caller (DESIGN §91).
  positions = n:
    let
      pos = set: k:
        let p = builtins.unsafeGetAttrPos k set; in
        if p == null then null else { inherit (p) file line column; };
      ours = p: hasPrefix libraryDir p.file;
      definitions = filter (p: p != null && !ours p)
        (map (pos (n._site or { })) [ "name" ] ++ map (pos n._args) [ "name" "type" "provider" ]);
      plain = v: isAttrs v && !(v ? _type) && (v.type or null) != "derivation" && !(v ? outPath)
        && !(v ? __build) && !(v ? __toString);
      attrs = prefix: set: builtins.concatMap (k:
        let here = prefix ++ [ k ]; v = set.${k}; in
        [ { name = names.renderPath here; value = pos set k; } ]
        ++ (if plain v then attrs here v else [ ])) (attrNames set);
      config = n._args.config or { };
    in
    {
      definition = if definitions == [ ] then null else head definitions;
      attributes = listToAttrs (filter (a: a.value != null) (if isAttrs config then attrs [ ] config else [ ]));
    };

  # This library's directory (with a trailing slash), whose lines `why` never names.
  libraryDir = "${toString ./..}/";

  # A build output as a __build leaf: the executor realises it before apply.
  drv = d:
    let
      isDrv = isAttrs d && (d.type or null) == "derivation";
      out = unsafeDiscardStringContext d.outPath;
      file = (d.passthru or { }).filePath or (d.filePath or null);
      fileStr = unsafeDiscardStringContext (toString file);
      path =
        if file == null then out
        else if hasPrefix "/" fileStr then fileStr
        else "${out}/${fileStr}";
    in
    if isDrv then { __build = { inherit path; drvPath = unsafeDiscardStringContext d.drvPath; }; }
    else if isString d && hasPrefix "/" d then { __build = { path = unsafeDiscardStringContext d; }; }
    else throw "nivis: lib.drv expects a derivation or an absolute store path, got ${names.describe d}";
in
{
  inherit isNode isProvider isMoved moved isRemoved removed constructorsIn mkProvider mkResource mkData mkEphemeral count forEach
    byKey drv positions;
}

# Infrastructure as modules: a small module evaluator of our own, builtins only (docs/DESIGN.md
# §63 says why not nixpkgs' lib.evalModules, and what this one leaves out).
#
#   modules.toIR { modules; ledger; args ? { }; }
#     evaluates the modules and returns the IR of config.nivis.{providers, resources, data,
#     consumers, variables, moved, removed, checks}, after checking `assertions` (warnings are
#     Nix traces)
#   modules.eval { modules; args ? { }; }  -> { config; options; }
#
# A module is a file (a path), an attribute set, or a function of
#   { config, lib, ledger, options, ... } (and `args`; keep the `...`) returning one:
#   { imports ? [ ]; options ? { }; config ? { }; }
# (an attribute set without options and config is all config, but for imports).
#
#   mkOption { type ? types.any; default ?; description ? ""; }
#   mkIf cond value    mkMerge [ values ]    mkDefault value    mkForce value
#   mkOverride priority value                (lower wins: mkForce 50, plain 100, mkDefault 1000)
#   types.any str int bool float number attrs path enum [ ... ] nullOr t listOf t attrsOf t
#   types.submodule module                   a module instance (attrsOf / listOf: many): its
#                                            resources get ids module.<path>.<provider>.…
#
# Errors name the option path and the file that defined (or declared) it.
{ nivisLib, ir, nodes, names }:
let
  inherit (builtins)
    all
    attrNames
    concatMap
    filter
    foldl'
    head
    isAttrs
    isFunction
    isList
    length
    tail
    typeOf
    ;

  showPath = path: builtins.concatStringsSep "." path;
  show =
    v:
    if builtins.elem (typeOf v) [
      "string"
      "int"
      "float"
      "bool"
      "null"
    ] then
      "${typeOf v} ${builtins.toJSON v}"
    else
      "a ${typeOf v}";
  isOption = v: isAttrs v && (v._type or null) == "option";
  wrapped = kind: v: isAttrs v && (v._type or null) == kind;

  mkOption =
    {
      type ? types.any,
      description ? "",
      ...
    }@o:
    o
    // {
      _type = "option";
      inherit type description;
    };
  mkIf = condition: content: {
    _type = "if";
    inherit condition content;
  };
  mkMerge = contents: {
    _type = "merge";
    inherit contents;
  };
  mkOverride = priority: content: {
    _type = "override";
    inherit priority content;
  };
  mkDefault = mkOverride 1000;
  mkForce = mkOverride 50;

  # Scalars: every definition must agree.
  unique =
    path: defs:
    let
      first = head defs;
      differ = filter (d: d.value != first.value) (tail defs);
    in
    if differ == [ ] then
      first.value
    else
      throw "The option `${showPath path}' has conflicting definitions: ${
        builtins.concatStringsSep ", " (map (d: "${show d.value} in ${d.file}") defs)
      }; give it one value, or mark one with lib.modules.mkForce / mkDefault";

  simple = name: check: {
    inherit name check;
    merge = unique;
  };

  types = {
    any = {
      name = "anything";
      check = _: true;
      merge = unique;
    };
    str = simple "a string" builtins.isString;
    int = simple "an integer" builtins.isInt;
    bool = simple "a boolean" builtins.isBool;
    float = simple "a float" builtins.isFloat;
    number = simple "a number" (v: builtins.isInt v || builtins.isFloat v);
    path = simple "a path" (v: builtins.isPath v || builtins.isString v);
    attrs = {
      name = "an attribute set";
      check = isAttrs;
      merge = _: defs: foldl' (acc: d: acc // d.value) { } defs;
    };
    enum = values: simple "one of ${builtins.toJSON values}" (v: builtins.elem v values);
    nullOr = t: {
      name = "null or ${t.name}";
      check = v: v == null || t.check v;
      merge =
        path: defs:
        let
          set = filter (d: d.value != null) defs;
        in
        if set == [ ] then null else t.merge path set;
    };
    listOf = t: {
      name = "a list of ${t.name}";
      check = isList;
      elem = t;
      # A list of submodules: each element its own instance, named by its index.
      merge =
        path: defs:
        let
          all' = concatMap (d: map (value: d // { inherit value; }) d.value) defs;
        in
        if t.isSubmodule or false then
          builtins.genList (i: t.merge (path ++ [ i ]) [ (builtins.elemAt all' i) ]) (length all')
        else
          map (d: d.value) all';
    };
    # A module instance: its definitions are the config of one evaluation of `module` (a file,
    # attribute set or function, as in `modules`), whose value is that evaluation's config.
    # Its resources are addressed `module.<path>.<provider>.<type>.<name>` (see instancePrefix)
    # and collected into the plan by toIR.
    submodule = module: {
      name = "a submodule";
      check = v: isAttrs v || isFunction v;
      isSubmodule = true;
      merge = path: defs: instance path module defs;
    };
    attrsOf = t: {
      name = "an attribute set of ${t.name}";
      check = isAttrs;
      elem = t;
      merge =
        path: defs:
        builtins.mapAttrs (name: ds: t.merge (path ++ [ name ]) (checked t (path ++ [ name ]) ds)) (
          byAttr defs
        );
    };
  };

  # The address prefix of the instance at option path `path`: `module.` and the path's names
  # joined with `__` (the separator lib.count and lib.forEach use): `db.eu` -> module.db__eu,
  # the third element of `db` -> module.db__2.
  instancePrefix =
    path:
    let
      parts = map (p: if builtins.isInt p then toString p else p) path;
      bad = filter (p: !names.isInstanceKey p) parts;
    in
    if bad != [ ] then
      throw "The option `${showPath parts}' is a module instance, but `${head bad}' cannot be part of an address (use letters, digits, '_' or '-')"
    else
      "module.${builtins.concatStringsSep "__" parts}";

  # One evaluation of `module` with `defs` as config, for the instance at `path`: its modules
  # get a `lib` whose constructors prefix the ids (nodes.constructorsIn); the Nivis options
  # (nivis.resources, …) are declared in it too. Instances do not nest (yet).
  instance =
    path: module: defs:
    let
      prefix = instancePrefix path;
      instanceLib =
        nivisLib
        // nodes.constructorsIn prefix
        // {
          modules = nivisLib.modules // {
            types = nivisLib.modules.types // {
              submodule = _: throw "nivis: lib.modules: a module instance (${prefix}) cannot declare module instances of its own (instances do not nest yet)";
            };
          };
        };
      evaluated = eval {
        modules = [ base module ] ++ map (d: { _file = d.file; config = d.value; }) defs;
        lib = instanceLib;
      };
      # Looking at the instance's option types finds a nested instance (refused above).
      nested = instancesIn evaluated.options evaluated.config;
    in
    builtins.seq prefix (builtins.seq nested (evaluated.config // { _nivisInstance = prefix; }));

  # `defs` with each value checked against `type` (and the elements of a list or attribute set
  # against its element type), or an error naming the option and the defining file.
  checked =
    type: path: defs:
    map (
      d:
      let
        bad = elem: "The option `${showPath path}' defined in ${d.file} is not ${type.name}: ${elem}";
        elemOk =
          if type ? elem && isList d.value then
            all (
              v: type.elem.check v || throw (bad "an element is ${show v}, not ${type.elem.name}")
            ) d.value
          else
            true;
      in
      if !type.check d.value then
        throw (bad "it is ${show d.value}")
      else
        builtins.seq elemOk d
    ) defs;

  # A module in its full form, called with `args`; `file` names it in errors.
  normalise =
    args: file: m:
    let
      isFile = builtins.isPath m || builtins.isString m;
      value = if isFile then import m else m;
      called = if isFunction value then value args else value;
      structured = called ? options || called ? config;
    in
    {
      file = if isFile then toString m else called._file or file;
      imports = called.imports or [ ];
      options = if structured then called.options or { } else { };
      config =
        if structured then
          called.config or { }
        else
          removeAttrs called [
            "_file"
            "imports"
          ];
    };

  # Every module reachable through `imports`, each once (files by path).
  collect =
    args: modules:
    let
      go =
        seen: parent: ms:
        foldl' (
          acc: i:
          let
            m = builtins.elemAt ms i;
            key = if builtins.isPath m || builtins.isString m then toString m else null;
          in
          if key != null && builtins.elem key acc.seen then
            acc
          else
            let
              n = normalise args "${parent}, module ${toString i}" m;
              inner = go (acc.seen ++ [ key ]) n.file n.imports;
            in
            {
              seen = inner.seen;
              list = acc.list ++ [ n ] ++ inner.list;
            }
        ) {
          inherit seen;
          list = [ ];
        } (builtins.genList (i: i) (length ms));
    in
    (go [ ] "the plan" modules).list;

  # The options trees of all modules in one; an option declared twice is an error.
  mergeOptions =
    path: decls:
    let
      byName = byAttr decls;
      one =
        name:
        let
          ds = byName.${name};
          options = filter (d: isOption d.value) ds;
        in
        if options == [ ] then
          mergeOptions (path ++ [ name ]) ds
        else if length ds > 1 then
          throw "The option `${showPath (path ++ [ name ])}' is declared more than once: in ${
            builtins.concatStringsSep " and " (map (d: d.file) ds)
          }"
        else
          (head options).value // { _file = (head options).file; };
    in
    builtins.mapAttrs (name: _: one name) byName;

  # `defs` (each { value; ... } with an attribute set as value) split by attribute name:
  # name -> the defs with value = that attribute's value, in order.
  byAttr =
    defs:
    builtins.mapAttrs (_: map (p: removeAttrs p [ "__name" ])) (
      builtins.groupBy (p: p.__name) (
        concatMap (
          d:
          map (
            name:
            d
            // {
              __name = name;
              value = d.value.${name};
            }
          ) (attrNames d.value)
        ) defs
      )
    );

  # The definitions at `path` in one module's config value `v`, with the conditions of the
  # mkIf around them (evaluated only when the option's value is: a condition may read config).
  defsAt =
    file: conds: v: path:
    if wrapped "if" v then
      defsAt file (conds ++ [ v.condition ]) v.content path
    else if wrapped "merge" v then
      concatMap (c: defsAt file conds c path) v.contents
    else if path == [ ] then
      [
        {
          inherit file conds;
          value = v;
        }
      ]
    else if isAttrs v && !(v ? _type) && v ? ${head path} then
      defsAt file conds v.${head path} (tail path)
    else
      [ ];

  # A definition's value without its mkOverride, and its priority.
  prioritised =
    d:
    if wrapped "override" d.value then
      prioritised (
        d
        // {
          value = d.value.content;
          priority = d.value.priority;
        }
      )
    else if wrapped "if" d.value then
      prioritised (
        d
        // {
          conds = d.conds ++ [ d.value.condition ];
          value = d.value.content;
        }
      )
    else
      { priority = 100; } // d;

  # The names at the top of a config value (through mkIf and mkMerge).
  topNames =
    v:
    if wrapped "if" v then
      topNames v.content
    else if wrapped "merge" v then
      concatMap topNames v.contents
    else if isAttrs v && !(v ? _type) then
      attrNames v
    else
      [ ];

  # Top-level name -> the definitions under it, module by module: an option's definitions
  # are looked up only in the modules that define something under its first name.
  definitionsByTop =
    modules:
    builtins.groupBy (d: d.top) (
      concatMap (
        m:
        concatMap (top: map (d: d // { inherit top; }) (defsAt m.file [ ] m.config [ top ])) (
          builtins.attrNames (builtins.listToAttrs (map (name: { inherit name; value = null; }) (topNames m.config)))
        )
      ) modules
    );

  optionValue =
    byTop: path: opt:
    let
      all' = concatMap (d: defsAt d.file d.conds d.value (tail path)) (byTop.${head path} or [ ]);
      active = filter (d: all (c: c) d.conds) (map prioritised all');
      best = foldl' (p: d: if d.priority < p then d.priority else p) 2000 active;
      chosen = filter (d: d.priority == best) active;
    in
    if chosen == [ ] then
      opt.default
        or (throw "The option `${showPath path}' (declared in ${opt._file}) is used but not defined")
    else
      opt.type.merge path (checked opt.type path chosen);

  # Config keys no option declares: an error naming the file.
  undeclared =
    options: modules:
    let
      walk =
        file: opts: path: v:
        if wrapped "if" v then
          walk file opts path v.content
        else if wrapped "merge" v then
          concatMap (walk file opts path) v.contents
        else if isAttrs v && !(v ? _type) then
          concatMap (
            name:
            if !(opts ? ${name}) then
              [ "`${showPath (path ++ [ name ])}' (defined in ${file})" ]
            else if isOption opts.${name} then
              [ ]
            else
              walk file opts.${name} (path ++ [ name ]) v.${name}
          ) (attrNames v)
        else
          [ "`${showPath path}' is not an option but is given ${show v} (in ${file})" ];
    in
    concatMap (m: walk m.file options [ ] m.config) modules;

  mapOptions =
    f: path: opts:
    builtins.mapAttrs (
      name: o: if isOption o then f (path ++ [ name ]) o else mapOptions f (path ++ [ name ]) o
    ) opts;

  eval =
    {
      modules,
      args ? { },
      lib ? nivisLib,
    }:
    let
      all' = collect fullArgs modules;
      fullArgs = args // {
        inherit config options lib;
      };
      options = mergeOptions [ ] (
        map (m: {
          inherit (m) file;
          value = m.options;
        }) all'
      );
      unknown = undeclared options all';
      byTop = definitionsByTop all';
      config =
        if unknown != [ ] then
          throw "No such option: ${builtins.concatStringsSep "; " unknown}; declare it with lib.modules.mkOption in some module's `options`"
        else
          mapOptions (optionValue byTop) [ ] options;
    in
    {
      inherit config options;
      # Every assertion that failed, with the file that defined it.
      failedAssertions = filter (a: !a.assertion) (
        concatMap (d: map (a: a // { inherit (d) file; }) d.value) (
          filter (d: all (c: c) d.conds) (
            map prioritised (byTop.assertions or [ ])
          )
        )
      );
    };

  # The options every Nivis module project has.
  base = {
    _file = "the Nivis library (lib.modules)";
    options = {
      nivis = {
        providers = mkOption {
          type = types.attrsOf types.any;
          default = { };
        };
        resources = mkOption {
          type = types.listOf types.any;
          default = [ ];
        };
        data = mkOption {
          type = types.listOf types.any;
          default = [ ];
        };
        consumers = mkOption {
          type = types.attrsOf types.any;
          default = { };
        };
        variables = mkOption {
          type = types.attrsOf types.any;
          default = { };
        };
        moved = mkOption {
          type = types.listOf types.any;
          default = [ ];
        };
        removed = mkOption {
          type = types.listOf types.any;
          default = [ ];
        };
        checks = mkOption {
          type = types.listOf types.any;
          default = [ ];
        };
      };
      assertions = mkOption {
        type = types.listOf types.attrs;
        default = [ ];
      };
      warnings = mkOption {
        type = types.listOf types.str;
        default = [ ];
      };
    };
  };

  # The module instances in `config` (options of a submodule type, or attrsOf / listOf one),
  # each its evaluated config.
  instancesIn =
    options: config:
    concatMap (
      name:
      let
        o = options.${name};
        v = config.${name};
      in
      if isOption o then
        (
          if o.type.isSubmodule or false then
            [ v ]
          else if (o.type.elem or { }).isSubmodule or false then
            (if isList v then v else builtins.attrValues v)
          else
            [ ]
        )
      else if isAttrs o then
        instancesIn o v
      else
        [ ]
    ) (filter (n: n != "_file") (attrNames options));

  toIR =
    {
      modules,
      ledger,
      args ? { },
    }:
    let
      evaluated = eval {
        modules = [ base ] ++ modules;
        args = args // {
          inherit ledger;
        };
      };
      c = evaluated.config;
      instances = instancesIn evaluated.options c;
      # The plan's own nivis.* and every instance's: lists concatenated (the plan's first),
      # attribute sets merged (the plan's win).
      gathered = {
        providers = foldl' (acc: i: acc // i.nivis.providers) { } instances // c.nivis.providers;
        consumers = foldl' (acc: i: acc // i.nivis.consumers) { } instances // c.nivis.consumers;
        variables = foldl' (acc: i: acc // i.nivis.variables) { } instances // c.nivis.variables;
      }
      // builtins.listToAttrs (
        map (k: {
          name = k;
          value = c.nivis.${k} ++ concatMap (i: i.nivis.${k}) instances;
        }) [ "resources" "data" "moved" "removed" "checks" ]
      );
      failed = evaluated.failedAssertions;
      warned = foldl' (acc: w: builtins.trace "nivis warning: ${w}" acc) true c.warnings;
    in
    # The declarations alone (see ir.nix): no assertion or warning forced.
    if isAttrs ledger && (ledger.variablesOnly or false) == true then
      ir.toIR { inherit (c.nivis) variables; inherit ledger; }
    else if failed != [ ] then
      throw "Failed assertion(s):\n${
        builtins.concatStringsSep "\n" (map (a: "- ${a.message} (option assertions, defined in ${a.file})") failed)
      }"
    else
      builtins.seq warned (
        ir.toIR {
          inherit (gathered)
            providers
            resources
            data
            consumers
            variables
            moved
            removed
            checks
            ;
          inherit ledger;
        }
      );
in
{
  inherit
    eval
    toIR
    mkOption
    mkIf
    mkMerge
    mkOverride
    mkDefault
    mkForce
    types
    ;
}

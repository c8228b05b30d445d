# Plan variables: declarations (emitted in the IR) and their values, which the
# executor passes in its private channel (ledger.secretsFile; ledger.vars is read too,
# for evaluations by hand). A value typed as text (--var, NIVIS_VAR_*) also comes
# verbatim in the channel's varsText: a string variable takes that text, so
# `--var t=2` is "2" and not the number the executor read it as. A variable declared
# sensitive = true is wrapped (values.mkSecret): it can be passed on or computed with
# through lib.str / lib.compute, and everything made from it is marked __sensitive in
# the IR. A declaration's `validation = [ { condition = value: BOOL; message; } ]` rules are
# checked on the value (default included): a failing one fails the evaluation naming the
# variable and the rule's message, never the value. The rules stay out of the IR (functions).
{ names, values }:
let
  inherit (builtins) attrNames elem filter head isAttrs isBool isFloat isInt isList isString mapAttrs throw;

  checks = {
    string = isString;
    number = v: isInt v || isFloat v;
    bool = isBool;
    list = isList;
    map = isAttrs;
    any = _: true;
  };
  nouns = { string = "a string"; number = "a number"; bool = "a bool"; list = "a list"; map = "a map (attrset)"; any = "anything"; };
  keys = [ "type" "default" "description" "sensitive" "validation" ];

  # null is a valid value of every type (an optional variable).
  fits = ty: v: v == null || checks.${ty} v;

  # What is wrong with a declaration's `validation` list, or null:
  #   validation = [ { condition = value: BOOL; message = STR; } ]
  validationProblem = rules:
    let
      bad = filter (r: !(isAttrs r && builtins.isFunction (r.condition or null) && isString (r.message or null)
        && builtins.attrNames r == [ "condition" "message" ])) (if isList rules then rules else [ ]);
    in
    if !isList rules then "validation must be a list of { condition = value: BOOL; message = STR; }"
    else if bad != [ ] then "each validation rule is { condition = value: BOOL; message = STR; } (condition a function of the value, message a string), got ${names.describe (head bad)}"
    else null;

  # The value, once every validation rule of `decl` holds for it; otherwise the throw naming the
  # variable and the first failing rule's message. The value itself is never quoted (a rule's
  # message is the author's), so a sensitive variable stays hidden.
  validated = name: decl: value:
    let
      failing = filter (r:
        let ok = r.condition value; in
        if isBool ok then !ok
        else throw "nivis: variable '${name}': a validation condition returned ${builtins.typeOf ok}, not a bool (message: ${r.message})")
        (decl.validation or [ ]);
    in
    if failing == [ ] then value
    else throw "nivis: variable '${name}': validation failed: ${(head failing).message}";

  # Validate one declaration; returns it unchanged.
  checkDecl = name: decl:
    let
      unknown = if isAttrs decl then filter (k: !elem k keys) (attrNames decl) else [ ];
      ty = decl.type or "any";
      problem =
        if !names.isIdent name then "the name must start with a letter or '_' and contain only letters, digits, '_' and '-'"
        else if !isAttrs decl then "a declaration is an attrset { type ? ...; default ? ...; description ? ...; sensitive ? false; }"
        else if unknown != [ ] then "unknown field '${head unknown}' (expected ${builtins.concatStringsSep ", " keys})"
        else if !isString ty || !(checks ? ${ty}) then "type must be one of string, number, bool, list, map, any"
        else if decl ? description && !isString decl.description then "description must be a string"
        else if decl ? sensitive && !isBool decl.sensitive then "sensitive must be a bool"
        else if decl ? default && !fits ty decl.default then "the default must be ${nouns.${ty}}, got ${names.describe decl.default}"
        else validationProblem (decl.validation or [ ]);
    in
    if problem == null then decl else throw "nivis: variable '${name}': ${problem}";

  # lib.vars ledger decls -> { name = value; }: the channel's values (or ledger.vars),
  # then defaults; sensitive ones wrapped.
  vars = ledger: decls:
    let
      chan = values.channel ledger;
      # The channel's values over the ledger's (an evaluation by hand may give either).
      field = k:
        (if isAttrs ledger && isAttrs (ledger.${k} or null) then ledger.${k} else { })
        // (if chan == null then { } else chan.${k} or { });
      given = field "vars";
      text = field "varsText";
    in
    if !isAttrs decls then throw "nivis: lib.vars expects an attrset of variable declarations"
    else mapAttrs (name: decl0:
      let
        decl = checkDecl name decl0;
        ty = decl.type or "any";
        secret = decl.sensitive or false;
        value =
          if ty == "string" && text ? ${name} then text.${name}
          else if given ? ${name} then given.${name}
          else if decl ? default then decl.default
          else throw "nivis: variable '${name}' has no value: set it with --var ${name}=VALUE${
            if secret then " (for a secret, NIVIS_VAR_${name}=VALUE or --var-file: arguments are visible to other users)" else ""}";
        # Never quote a sensitive value in an error.
        got = if secret then "a ${builtins.typeOf value} (value hidden: the variable is sensitive)" else names.describe value;
      in
      if !fits ty value then throw "nivis: variable '${name}' must be ${nouns.${ty}}, got ${got}"
      # Checked when the variable is forced (toIR forces every one), used or not.
      else if secret && value != null then builtins.seq (validated name decl value) (values.mkSecret name value)
      else validated name decl value) decls;

  # The IR form of the declarations (fields left out when not given). A sensitive
  # variable's default is not repeated: the IR never holds a secret in plain text.
  toIR = decls:
    mapAttrs (name: decl0:
      let
        decl = checkDecl name decl0;
        fields = { type = null; description = null; sensitive = null; }
          // (if decl.sensitive or false then { } else { default = null; });
      in
      builtins.intersectAttrs fields decl) decls;
in
{
  inherit vars toIR;
}

# Policy as code: rules Nivis checks before it changes anything (docs/DESIGN.md §62, the
# book's "Modules and policies"). A project lists them beside its plan, `nivis.policies`.
#
#   policy.static { name; level ? "mandatory"; check; message ? null; }
#     checked on every resource and data source of each evaluation, before any provider
#     call of its phase. check: resource -> true | false | "message";
#     resource = { id; kind = "resource" | "data"; type; name; provider; config; }
#     (a sensitive value reads "(sensitive)", one known only later { unknown = true; })
#   policy.plan { name; level ? "mandatory"; check; message ? null; }
#     checked on every planned change of a phase before the phase applies anything.
#     check: change -> true | false | "message";
#     change = { address; type; action; phase; attributes; before; after; }
#       action: "create" "update" "replace" "delete" "forget" "recreate" "read"
#       attributes: [ { path; before; after; sensitive; forcesReplacement; } ]
#       before/after: the changed attributes' values by path ("labels.env")
#   policy.phase { name; level ? "mandatory"; check; message ? null; }
#     checked once per phase on the list of its changes ("no more than 3 deletes").
#
# level "advisory" warns; "mandatory" refuses (`nivis plan` fails, `nivis apply` changes
# nothing more) unless `--override NAME --reason TEXT` is given. message: a string, or a
# function of the resource or change, used when check returns false.
#
# `run` is what Nivis evaluates; the executor inlines this file (src/policy.rs), so it
# imports nothing.
let
  levels = [
    "advisory"
    "mandatory"
  ];

  mk =
    kind:
    {
      name,
      level ? "mandatory",
      check,
      message ? null,
    }:
    if !builtins.isString name || name == "" then
      throw "lib.policy.${kind}: name must be a non-empty string"
    else if !builtins.elem level levels then
      throw "lib.policy.${kind} ${name}: level must be \"advisory\" or \"mandatory\", not ${builtins.toJSON level}"
    else if !builtins.isFunction check then
      throw "lib.policy.${kind} ${name}: check must be a function"
    else
      {
        __policy = kind;
        inherit
          name
          level
          check
          message
          ;
      };

  # The violation (a list of none or one) of `rule` on `subject` at `address`.
  verdict =
    rule: address: subject: result:
    if result == true then
      [ ]
    else if result == false || builtins.isString result then
      [
        {
          rule = rule.name;
          level = rule.level;
          inherit address;
          message =
            if builtins.isString result then
              result
            else if rule.message == null then
              "the rule ${rule.name} does not hold"
            else if builtins.isFunction rule.message then
              rule.message subject
            else
              rule.message;
        }
      ]
    else
      throw "policy ${rule.name}: check returned a ${builtins.typeOf result} for ${toString address}; return true (passes), false or a message string (a violation)";

  checked =
    policies:
    let
      list =
        if builtins.isList policies then
          policies
        else
          throw "nivis.policies must be a list of lib.policy.static / plan / phase rules, not a ${builtins.typeOf policies}";
      one =
        i: p:
        if builtins.isAttrs p && p ? __policy then
          p
        else
          throw "nivis.policies, element ${toString i}: not a rule; make it with lib.policy.static, lib.policy.plan or lib.policy.phase";
    in
    builtins.genList (i: one i (builtins.elemAt list i)) (builtins.length list);

  run =
    policies: input:
    let
      rules = checked policies;
      of = kind: builtins.filter (r: r.__policy == kind) rules;
      static = builtins.concatMap (
        rule: builtins.concatMap (r: verdict rule r.id r (rule.check r)) input.resources
      ) (of "static");
      perChange = builtins.concatMap (
        rule: builtins.concatMap (c: verdict rule c.address c (rule.check c)) input.changes
      ) (of "plan");
      perPhase = builtins.concatMap (rule: verdict rule null input.changes (rule.check input.changes)) (
        of "phase"
      );
    in
    {
      names = map (r: r.name) rules;
      staticRules = builtins.length (of "static");
      planRules = builtins.length (of "plan") + builtins.length (of "phase");
      violations = if input.kind == "static" then static else perChange ++ perPhase;
    };
in
{
  static = mk "static";
  plan = mk "plan";
  phase = mk "phase";
  inherit run;
}

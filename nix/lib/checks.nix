# Hermetic checks of a plan, for a project flake's `checks`: `nix flake check` evaluates the
# plan against a recorded ledger, offline, with no provider, no credentials and no nixpkgs.
#
#   checks.x86_64-linux = nivis.lib.checks {
#     plan = self.nivis.plan;
#     ledger = ./nivis-ledger.json;   # optional: `nivis output --json > nivis-ledger.json`
#     golden = ./nivis-ir.json;       # optional: the IR the plan must produce
#   };
#
# gives `nivis-plan` (the plan evaluates to a well-formed IR: schemaVersion 1, providers
# declared, edges between declared nodes) and, with `golden`, `nivis-plan-golden` (the IR is
# the snapshot's; its `ir` attribute is the current IR, to update the snapshot). A failure is
# an evaluation error naming what is wrong. The derivations build nothing (builtin:buildenv of
# no packages: no shell, any sandbox); building them proves the plan evaluated.
{ }:
let
  inherit (builtins)
    attrNames concatMap elem filter fromJSON head isAttrs isList isPath isString length
    listToAttrs readFile throw toJSON;

  # A ledger given as a file (`nivis output --json`, or a ledger written by hand) or a value.
  readLedger = ledger:
    let
      doc = if isPath ledger || isString ledger then fromJSON (readFile ledger) else ledger;
    in
    if !isAttrs doc then throw "nivis: lib.checks: the ledger must be an attrset or a JSON file holding one"
    else if doc ? outputs then doc
    else if doc ? resources then { outputs = doc.resources; }
    else if doc == { } then { outputs = { }; }
    else throw "nivis: lib.checks: the ledger has neither `outputs` (a ledger) nor `resources` (what `nivis output --json` prints)";

  passing = name: proof: derivation {
    inherit name;
    system = "builtin";
    builder = "builtin:buildenv";
    derivations = [ ];
    # Building needs this string, so evaluating the check evaluates the plan.
    manifest = builtins.hashString "sha256" proof;
  };

  # The structure a plan's IR must have beyond what toIR enforces while building it.
  problems = ir:
    let
      nodes = (ir.resources or [ ]) ++ (ir.data or [ ]);
      ids = map (n: n.id) nodes;
      providers = attrNames (ir.providers or { });
    in
    (if (ir.schemaVersion or null) != 1 then [ "schemaVersion is ${toJSON (ir.schemaVersion or null)}, not 1 (is the plan made with lib.toIR?)" ] else [ ])
    ++ (if !isList (ir.resources or null) then [ "resources is not a list" ] else [ ])
    ++ concatMap (n: if elem n.provider providers then [ ] else [ "${n.id} uses the undeclared provider ${n.provider}" ]) nodes
    ++ concatMap (e:
      (if elem e.from ids then [ ] else [ "an edge of ${e.to} reads ${e.from}, which the plan does not declare" ])
      ++ (if elem e.to ids then [ ] else [ "an edge reads into ${e.to}, which the plan does not declare" ]))
      (ir.edges or [ ]);

  # The ids of the nodes that differ between two IRs, and the sections that do.
  differences = want: got:
    let
      byId = ir: listToAttrs (map (n: { name = n.id; value = n; }) ((ir.resources or [ ]) ++ (ir.data or [ ])));
      a = byId want;
      b = byId got;
      ids = attrNames (a // b);
      nodes = filter (id: (a.${id} or null) != (b.${id} or null)) ids;
      sections = filter (k: k != "resources" && k != "data" && (want.${k} or null) != (got.${k} or null)) (attrNames (want // got));
    in
    nodes ++ map (k: "(${k})") sections;

  checks =
    { plan
    , ledger ? { }
    , golden ? null
    , name ? "nivis-plan"
    }:
    let
      ir = plan (readLedger ledger);
      found = problems ir;
      json = toJSON ir;
      # The errors are thrown from the derivation's inputs, so `.ir` still evaluates.
      valid = passing name (
        if found == [ ] then json
        else throw "nivis: lib.checks: the plan's IR is not well formed: ${head found}${if length found > 1 then " (and ${toString (length found - 1)} more)" else ""}"
      ) // { inherit ir; };
      file = baseNameOf (toString golden);
      want = fromJSON (readFile golden);
      got = fromJSON json;
      goldenCheck = passing "${name}-golden" (
        if want == got then json
        else throw "nivis: lib.checks: the plan's IR differs from the snapshot ${file} at: ${builtins.concatStringsSep ", " (differences want got)}. If the change is intended, write the snapshot again, as the book's chapter on reviewing changes does: system=$(nix eval --impure --raw --expr builtins.currentSystem); nix eval --json \".#checks.$system.${name}.ir\" > ${file}"
      ) // { inherit ir; };
    in
    { ${name} = valid; }
    // (if golden == null then { } else { "${name}-golden" = goldenCheck; });
in
{
  inherit checks;
}

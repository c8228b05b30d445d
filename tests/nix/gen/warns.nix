# Deprecated types and arguments evaluate, with a warning: name -> { expr; expect; }.
# run.py requires `nix eval` to succeed with `expect` in stderr.
{ root, gen }:
let
  t = import ./lib.nix { inherit root gen; };
  inherit (t) lib kinds;
  minimal = { s = "s"; single = { name = "one"; }; list = [ { port = 1; } ]; };
  plan = r: lib.toIR { providers.kinds = lib.mkProvider { source = "provider-kinds"; }; resources = [ r ]; };
in
{
  deprecatedArgument = {
    expr = plan (kinds.resources.kinds_thing { name = "K"; config = minimal // { old = "x"; }; });
    expect = "trace: nivis: warning: kinds_thing: argument 'old' is deprecated: Use s instead.";
  };
  deprecatedBlock = {
    expr = plan (kinds.resources.kinds_thing { name = "K"; config = minimal // { legacy = [ { x = "y"; } ]; }; });
    expect = "trace: nivis: warning: kinds_thing: argument 'legacy' is deprecated";
  };
  deprecatedType = {
    expr = plan (kinds.resources.kinds_old { name = "O"; config.x = "y"; });
    expect = "trace: nivis: warning: kinds_old is deprecated";
  };
}

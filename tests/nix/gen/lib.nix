# The Nivis lib with lib.typecheck, and the providers generated under `gen` (see run.sh).
# lib.typecheck is added here from nix/lib/typecheck.nix when nix/default.nix does not
# export it.
{ root, gen }:
let
  base = import (root + "/nix");
  names = import (root + "/nix/lib/names.nix");
  values = import (root + "/nix/lib/values.nix") { inherit names; };
  lib =
    if base ? typecheck then base
    else base // { typecheck = import (root + "/nix/lib/typecheck.nix") { inherit names values; }; };
in
{
  inherit lib base;
  alpha = import (gen + "/alpha") lib;
  kinds = import (gen + "/kinds") lib;
}

# A synthetic plan of `n` resources for timing toIR: a chain where every resource
# references its predecessor directly and through a derived string, with nested
# config, a forEach/count mix and half of the chain already applied.
{ lib, n ? 1000 }:
let
  inherit (lib) mkProvider mkResource str toIR;
  half = n / 2;
  node = i: prev: mkResource {
    provider = if i - (i / 2) * 2 == 0 then "alpha" else "beta";
    type = "bench_item";
    name = "r${toString i}";
    config = {
      index = i;
      label = if prev == null then "root" else str [ "after-" (prev.refAttr "value") ];
      parent = if prev == null then null else prev.refAttr "id";
      tags = { team = "infra"; tier = "t${toString (i - (i / 10) * 10)}"; "a.b" = true; };
      disks = [ { size = 10; } { size = 20; name = "data-${toString i}"; } ];
    };
    dependsOn = if prev == null then [ ] else [ prev.id ];
  };
  chain = builtins.foldl' (acc: i: acc ++ [ (node i (if acc == [ ] then null else builtins.elemAt acc (i - 1))) ]) [ ] (builtins.genList (i: i) n);
  ledger = {
    phase = 1;
    outputs = builtins.listToAttrs (builtins.genList (i: {
      name = "${if i - (i / 2) * 2 == 0 then "alpha" else "beta"}.bench_item.r${toString i}";
      value = { id = "id-${toString i}"; value = "value-${toString i}"; };
    }) half);
  };
in
ledger0: toIR {
  providers = { alpha = mkProvider { source = "provider-alpha"; }; beta = mkProvider { source = "provider-beta"; }; };
  resources = chain;
  ledger = if ledger0 == null then ledger else ledger0;
}

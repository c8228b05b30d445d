# The real-LXD scenario (tests/e2e/real_lxd.rs, bench/lxd.py): ten objects through
# terraform-provider-lxd 1.5.0 — a storage pool, three volumes, a bridge network, two profiles,
# two running busybox containers and a snapshot — with references Nivis resolves within a phase
# and a profile whose config Nix computes from a container's `status` and the snapshot's
# `created_at` (a second phase). `step` says what the test changes between runs.
{ lib
, provider # path of the provider binary
, socket # the LXD daemon's unix socket
, poolDir # where the `extra` storage pool keeps its files
, step ? { }
}:
let
  s = {
    role = "web"; # base's user.role: changed in place
    cache = "cache"; # the cache volume's LXD name: a new one forces replacement
    renamed = false; # the logs volume declared as `journal`, moved there with lib.moved
    imported = false; # declare the lxc-made profile `imported`
    late = false; # declare the container `late`
  } // step;
  lxd = type: name: config: lib.mkResource { provider = "lxd"; inherit type name config; };

  pool = lxd "lxd_storage_pool" "extra" {
    name = "extra";
    driver = "dir";
    config.source = poolDir;
  };
  data = lxd "lxd_volume" "data" { name = "data"; pool = pool.refAttr "name"; };
  logs = lxd "lxd_volume" (if s.renamed then "journal" else "logs") {
    name = "logs";
    pool = pool.refAttr "name";
  };
  cache = lxd "lxd_volume" "cache" { name = s.cache; pool = "default"; };
  # No addresses and no firewall: the daemon's namespace has neither DHCP nor iptables.
  net = lxd "lxd_network" "br" {
    name = "nivisbr0";
    config = {
      "ipv4.address" = "none";
      "ipv6.address" = "none";
      "ipv4.firewall" = "false";
      "ipv6.firewall" = "false";
    };
  };
  base = lxd "lxd_profile" "base" {
    name = "base";
    config."user.role" = s.role;
    device = [{
      name = "eth0";
      type = "nic";
      properties = { nictype = "bridged"; parent = net.refAttr "name"; };
    }];
  };
  container = name: disks: lxd "lxd_container" name {
    inherit name;
    image = "busybox";
    profiles = [ "default" (base.refAttr "name") ];
    wait_for_network = false;
    device = map
      (d: {
        inherit (d) name;
        type = "disk";
        properties = { path = "/${d.name}"; source = d.volume.refAttr "name"; pool = pool.refAttr "name"; };
      })
      disks;
  };
  web = container "web" [{ name = "data"; volume = data; }];
  worker = container "worker" [{ name = "logs"; volume = logs; }];
  snap = lxd "lxd_snapshot" "first" { name = "first"; container_name = web.refAttr "name"; };
  # Computed by Nix from what the apply returned: evaluated again once web and snap exist.
  observed = lxd "lxd_profile" "observed" {
    name = "observed";
    config = lib.compute { status = web.refAttr "status"; taken = snap.refAttr "created_at"; }
      (v: { "user.web-status" = v.status; "user.snapshot-taken" = v.taken; });
  };
  imported = lxd "lxd_profile" "imported" { name = "imported"; config."user.origin" = "lxc"; };
  late = container "late" [ ];
in
ledger: lib.toIR {
  providers.lxd = lib.mkProvider {
    source = provider;
    config.lxd_remote = [{ name = "test"; scheme = "unix"; address = socket; default = true; }];
  };
  resources = [ pool data logs cache net base web worker snap observed ]
    ++ (if s.imported then [ imported ] else [ ])
    ++ (if s.late then [ late ] else [ ]);
  moved = if s.renamed then [ (lib.moved { from = "lxd.lxd_volume.logs"; to = logs; }) ] else [ ];
  inherit ledger;
}

#!/usr/bin/env python3
"""The LXD oracle: Nivis and Terraform 1.0.3 on the real lxd provider (1.5.0) and real LXD 5.0
daemons (`bench/difftest.py --provider lxd`; DESIGN §110).

Each engine gets a daemon of its own (tests/lxd.py: offline, own namespaces), prepared alike
(a second `dir` pool `other`, the busybox image under a second alias `busybox2`), so both see
identical, independent worlds with the same LXD names, and both run at the same time. A
seeded generator edits one configuration cycle after cycle:

  * profiles `lxd_profile.p0`..`p3` (config keys `user.*`, a description; a new LXD `name`
    replaces; `create_before_destroy`, `ignore_changes = [description]`, `prevent_destroy`),
  * custom volumes `lxd_volume.v0`..`v2` (`user.*` config; a new name or a move between the
    pools `default` and `other` replaces),
  * at most one busybox container `lxd_container.ct` (not started: a stopped one is quick)
    whose `profiles` names a profile resource's `name` (the replacement orders of a profile
    renamed under a container, with and without `create_before_destroy`); its user config
    changes in place, its image alias (`busybox` / `busybox2`, one image) replaces, rarely,
  * **imports**: a profile made with `lxc` in both daemons, declared with `importId` for Nivis
    and imported with `terraform import` before Terraform's plan; a volume imported the same
    way, which both must refuse (lxd 1.5.0 has importers for containers, networks, profiles
    and storage pools only),
  * **drift** between cycles, made identically in both daemons with `lxc`: a profile's key set
    or unset, a volume's key set, the container's key set, an object deleted.

Each cycle both engines plan, apply and plan again; this compares the planned action of every
address (create, update, replace in either order, delete) and what Nivis imports, that both
refuse the same plans (`prevent_destroy`, an import lxd cannot do), that both applies succeed
or both fail (a profile still in use cannot be deleted; a create-before-destroy container
whose fixed name is taken: both fail alike, the edits are then undone in both and that undo
compared as a cycle), that both second plans are no-ops, and the final worlds: each daemon's
profiles, volumes and containers (names, config, description, profiles, status) and each
tool's state (the same attributes per address).

Documented difference (DESIGN §110): a profile removed (or replaced destroy-first) in the
cycle where the container stops using it is deleted first by Terraform, and LXD refuses
("Profile is currently in use"); Nivis deletes what is no longer declared at the fixpoint, and
a replaced object after the update of what stopped reading it, so it succeeds. The harness
recognises it (`deleted_while_used`), converges Terraform as its user would (`-target` the
container, then a full apply) and compares the worlds and states as usual;
when Nivis's apply fails a step later (the replacement's new name is taken), Terraform is taken
to the same point the same way and both are undone as any failure alike.

Alike in both, and compared as such: a profile renamed under the container without
`create_before_destroy` (both applies fail: in use), a `create_before_destroy` container
replaced under its fixed name (both fail: the name is taken), a volume import (both refuse),
and a plan after an out-of-band delete (both fail: lxd 1.5.0 knows LXD 3's "not found" only,
DESIGN §90); then both forget the record (`terraform state rm`, `nivis state rm`) and must plan
the same create. A failed apply is undone in both, and the undo compared as a cycle.

Usage: bench/difftest.py --provider lxd [--cycles N] [--seed S | --seeds A-B [--jobs J] [--logs DIR]]
[--nivis PATH] [--keep]; each run prints what it reached (the actions, refusals, failures and
drifts it made happen). Exits 1 on any difference not documented.
"""

from __future__ import annotations

import collections
import concurrent.futures
import copy
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import difftest  # noqa: E402
from common import fetch, load_module  # noqa: E402

REPO = BENCH.parent
PROFILES = [f"p{i}" for i in range(4)]
VOLUMES = [f"v{i}" for i in range(3)]
CT = "ct"
KEYS = ["user.a", "user.b", "user.c"]
TYPES = {"p": "lxd_profile", "v": "lxd_volume", "c": "lxd_container"}


def kind_of(slot: str) -> str:
    return TYPES[slot[0]]


# ---------------------------------------------------------------- the generator

def new_profile(rng: random.Random, slot: str) -> dict:
    return {"name": f"{slot}-0", "gen": 0, "cfg": {rng.choice(KEYS): str(rng.randint(0, 3))},
            "desc": f"d{rng.randint(0, 2)}", "cbd": False, "ign": False, "pd": False, "imp": None}


def edit_profile(config: dict, rng: random.Random, slot: str) -> str:
    """A profile edited: a key set or unset, its description, a new name (a replacement, with
    `create_before_destroy` half the time when the container uses it), `ignore_changes` turned
    on with a description change in the same cycle (nothing to do in both), `prevent_destroy`
    turned on with a rename or a removal most times (both refuse)."""
    p = config["prof"][slot]
    used = config["ct"] is not None and config["ct"]["prof"] == slot
    kind = rng.choice(["set", "set", "unset", "desc", "rename", "rename", "cbd", "ign", "pd", "remove"])
    if kind == "set":
        p["cfg"][rng.choice(KEYS)] = str(rng.randint(0, 3))
    elif kind == "unset" and p["cfg"]:
        del p["cfg"][rng.choice(sorted(p["cfg"]))]
    elif kind == "desc":
        p["desc"] = f"d{(int(p['desc'][1:]) + 1) % 3}"
    elif kind == "rename":
        if used and rng.random() < 0.5:
            p["cbd"] = True
            kind = "rename (cbd)"
        p["gen"] += 1
        p["name"] = f"{slot}-{p['gen']}"
        return f"{slot} {kind} -> {p['name']}" + (" under ct" if used else "")
    elif kind == "cbd":
        p["cbd"] = not p["cbd"]
    elif kind == "ign":
        p["ign"] = not p["ign"]
        if p["ign"]:
            p["desc"] = f"d{(int(p['desc'][1:]) + 1) % 3}"
            kind = "ign + desc"
    elif kind == "pd":
        p["pd"] = not p["pd"]
        if p["pd"] and rng.random() < 0.7:
            return f"{slot} pd + " + remove_or_rename(config, rng, slot)
    elif kind == "remove":
        return remove_or_rename(config, rng, slot, "remove")
    return f"{slot} {kind}"


def remove_or_rename(config: dict, rng: random.Random, slot: str, kind: str = "") -> str:
    p = config["prof"][slot]
    if (kind or rng.choice(["remove", "rename"])) == "rename":
        p["gen"] += 1
        p["name"] = f"{slot}-{p['gen']}"
        return f"rename -> {p['name']}"
    del config["prof"][slot]
    if config["ct"] and config["ct"]["prof"] == slot:
        config["ct"]["prof"] = None
    return f"{slot} remove"


def edit_volume(config: dict, rng: random.Random, slot: str) -> str:
    v = config["vol"][slot]
    kind = rng.choice(["set", "set", "rename", "pool", "remove"])
    if kind == "set":
        v["cfg"][rng.choice(KEYS)] = str(rng.randint(0, 3))
    elif kind == "rename":
        v["gen"] += 1
        v["name"] = f"{slot}-{v['gen']}"
    elif kind == "pool":
        v["pool"] = "other" if v["pool"] == "default" else "default"
    else:
        del config["vol"][slot]
    return f"{slot} {kind}"


def edit_container(config: dict, rng: random.Random) -> str:
    ct = config["ct"]
    if ct is None:
        prof = rng.choice(sorted(config["prof"])) if config["prof"] and rng.random() < 0.8 else None
        config["ct"] = {"name": "ct-0", "image": "busybox", "prof": prof, "cfg": {}, "cbd": False}
        return f"add {CT} (profile {prof})"
    kind = rng.choice(["prof", "prof", "set", "set", "cbd", "image", "remove"])
    if kind == "prof":
        ct["prof"] = rng.choice(sorted(config["prof"])) if config["prof"] and rng.random() < 0.8 else None
        return f"{CT} profile {ct['prof']}"
    if kind == "set":
        ct["cfg"][rng.choice(KEYS)] = str(rng.randint(0, 3))
    elif kind == "cbd":
        ct["cbd"] = not ct["cbd"]
    elif kind == "image":
        # The same image under another alias: a replacement; with create_before_destroy the new
        # container's fixed name is taken, and both must fail alike.
        ct["image"] = "busybox2" if ct["image"] == "busybox" else "busybox"
        ct["cbd"] = rng.random() < 0.5
        return f"{CT} image{' (cbd)' if ct['cbd'] else ''}"
    else:
        config["ct"] = None
    return f"{CT} {kind}"


def edit(config: dict, rng: random.Random, world: "Worlds", cycle: int) -> str:
    """One random edit of `config`: {"prof": {slot: profile}, "vol": {slot: volume}, "ct":
    container or None}. An import makes its object with `lxc` in both daemons here."""
    kind = rng.choice(["profile", "profile", "profile", "volume", "volume", "container", "import", "add"])
    free_p = [s for s in PROFILES if s not in config["prof"]]
    free_v = [s for s in VOLUMES if s not in config["vol"]]
    if kind == "import" and free_p and rng.random() < 0.8:
        slot, name = rng.choice(free_p), world.fresh(f"imp{cycle}")
        made = {"user.a": str(rng.randint(0, 1))}
        world.lxc_both("profile", "create", name)
        world.lxc_both("profile", "edit", name, stdin=json.dumps({"config": made, "description": "d0", "devices": {}}))
        p = new_profile(rng, slot)
        p.update(name=name, imp=name, cfg=dict(made) if rng.random() < 0.5 else {"user.a": "2"})
        config["prof"][slot] = p
        return f"import profile {name} as {slot}"
    if kind == "import" and free_v and rng.random() < 0.4:  # refused, and the cycle undone: rarer
        slot, name = rng.choice(free_v), world.fresh(f"impv{cycle}")
        world.lxc_both("storage", "volume", "create", "default", name)
        config["vol"][slot] = {"name": name, "gen": 0, "pool": "default", "cfg": {}, "imp": name}
        return f"import volume {name} as {slot}"
    if kind == "container" and (config["ct"] or rng.random() < 0.5):
        return edit_container(config, rng)
    if kind == "profile" and config["prof"]:
        # Half the time the profile the container uses: its renames meet the container.
        used = config["ct"]["prof"] if config["ct"] and config["ct"]["prof"] and rng.random() < 0.5 else None
        return edit_profile(config, rng, used or rng.choice(sorted(config["prof"])))
    if kind == "volume" and config["vol"]:
        return edit_volume(config, rng, rng.choice(sorted(config["vol"])))
    if free_p and (rng.random() < 0.6 or not free_v):
        slot = rng.choice(free_p)
        config["prof"][slot] = new_profile(rng, slot)
        return f"add {slot}"
    if free_v:
        slot = rng.choice(free_v)
        config["vol"][slot] = {"name": f"{slot}-0", "gen": 0, "pool": "default", "imp": None,
                               "cfg": {rng.choice(KEYS): str(rng.randint(0, 3))}}
        return f"add {slot}"
    return "add skipped"


def initial(rng: random.Random) -> dict:
    """Cycle 0's configuration: two profiles, a volume and, most times, the container using one
    of the profiles, so that the first edits already meet references."""
    config = {"prof": {s: new_profile(rng, s) for s in ("p0", "p1")}, "vol": {}, "ct": None}
    config["vol"]["v0"] = {"name": "v0-0", "gen": 0, "pool": "default", "imp": None, "cfg": {"user.a": "1"}}
    if rng.random() < 0.7:
        config["ct"] = {"name": "ct-0", "image": "busybox", "prof": rng.choice(["p0", "p1"]), "cfg": {}, "cbd": False}
    return config


def drift(config: dict, rng: random.Random, world: "Worlds") -> tuple[str, str | None]:
    """An out-of-band change made with `lxc` in both daemons; returns what was done and the
    address of an object deleted (whose record both must then forget)."""
    choices = [("profile", s) for s in config["prof"]] + [("volume", s) for s in config["vol"]]
    if config["ct"]:
        choices.append(("container", CT))
    if not choices:
        return "no drift (nothing to change)", None
    what, slot = rng.choice(choices)
    key, value = rng.choice(KEYS), f"x{rng.randint(0, 9)}"
    if what == "container":
        world.lxc_both("config", "set", config["ct"]["name"], key, value)
        return f"drift: lxc config set {CT} {key}", None
    if what == "volume":
        v = config["vol"][slot]
        if rng.random() < 0.25:
            world.lxc_both("storage", "volume", "delete", v["pool"], v["name"])
            return f"drift: lxc storage volume delete {v['name']}", f"lxd_volume.{slot}"
        world.lxc_both("storage", "volume", "set", v["pool"], v["name"], key, value)
        return f"drift: lxc storage volume set {v['name']} {key}", None
    p = config["prof"][slot]
    used = config["ct"] and config["ct"]["prof"] == slot
    roll = rng.random()
    if roll < 0.2 and not used:
        world.lxc_both("profile", "delete", p["name"])
        return f"drift: lxc profile delete {p['name']}", f"lxd_profile.{slot}"
    if roll < 0.5 and p["cfg"]:
        key = rng.choice(sorted(p["cfg"]))
        world.lxc_both("profile", "unset", p["name"], key)
        return f"drift: lxc profile unset {p['name']} {key}", None
    world.lxc_both("profile", "set", p["name"], key, value)
    return f"drift: lxc profile set {p['name']} {key}", None


# ---------------------------------------------------------------- the two configurations

def tf_lifecycle(r: dict) -> dict:
    return difftest.tf_lifecycle(r, ignored="description")


def terraform_config(config: dict, socket: str) -> dict:
    res: dict = {}
    for slot, p in config["prof"].items():
        body = {"name": p["name"], "description": p["desc"], **({"config": p["cfg"]} if p["cfg"] else {})}
        res.setdefault("lxd_profile", {})[slot] = {**body, **tf_lifecycle(p)}
    for slot, v in config["vol"].items():
        res.setdefault("lxd_volume", {})[slot] = {"name": v["name"], "pool": v["pool"],
                                                  **({"config": v["cfg"]} if v["cfg"] else {})}
    ct = config["ct"]
    if ct:
        profiles = ["default"] + ([f"${{lxd_profile.{ct['prof']}.name}}"] if ct["prof"] else [])
        res["lxd_container"] = {CT: {"name": ct["name"], "image": ct["image"], "profiles": profiles,
                                     "start_container": False, "wait_for_network": False,
                                     **({"config": ct["cfg"]} if ct["cfg"] else {}), **tf_lifecycle(ct)}}
    doc = {
        "terraform": {"required_providers": {"lxd": {"source": "terraform-lxd/lxd", "version": "1.5.0"}}},
        "provider": {"lxd": {"lxd_remote": [{"name": "local", "scheme": "unix", "address": socket, "default": True}]}},
    }
    if res:
        doc["resource"] = res
    return doc


def nix_attrs(d: dict) -> str:
    return "{ " + " ".join(f"{json.dumps(k)} = {json.dumps(v)};" for k, v in d.items()) + " }"


def nv_lifecycle(r: dict) -> str:
    return difftest.nv_lifecycle(r, ignored="description")


def nivis_plan(config: dict, provider: str, socket: str) -> str:
    binds = []

    def resource(slot: str, body: str, extra: str = ""):
        binds.append(f'{slot} = lib.mkResource {{ provider = "lxd"; type = "{kind_of(slot)}"; name = "{slot}"; '
                     f"config = {{ {body} }}; {extra} }};")

    def imported(r: dict) -> str:
        return f"importId = {json.dumps(r['imp'])};" if r.get("imp") else ""

    for slot, p in config["prof"].items():
        cfg = f"config = {nix_attrs(p['cfg'])};" if p["cfg"] else ""
        resource(slot, f'name = "{p["name"]}"; description = "{p["desc"]}"; {cfg}', nv_lifecycle(p) + imported(p))
    for slot, v in config["vol"].items():
        cfg = f"config = {nix_attrs(v['cfg'])};" if v["cfg"] else ""
        resource(slot, f'name = "{v["name"]}"; pool = "{v["pool"]}"; {cfg}', imported(v))
    ct = config["ct"]
    if ct:
        prof = f'({ct["prof"]}.refAttr "name")' if ct["prof"] else ""
        cfg = f"config = {nix_attrs(ct['cfg'])};" if ct["cfg"] else ""
        resource(CT, f'name = "{ct["name"]}"; image = "{ct["image"]}"; profiles = [ "default" {prof} ]; '
                     f"start_container = false; wait_for_network = false; {cfg}", nv_lifecycle(ct))
    names = sorted(config["prof"]) + sorted(config["vol"]) + ([CT] if ct else [])
    remote = f'[ {{ name = "local"; scheme = "unix"; address = {json.dumps(socket)}; default = true; }} ]'
    return (f"let lib = import {REPO}/nix; in ledger: let {' '.join(binds)} in lib.toIR {{ "
            f"providers.lxd = lib.mkProvider {{ source = {json.dumps(provider)}; config.lxd_remote = {remote}; }}; "
            f"resources = [ {' '.join(names)} ]; inherit ledger; }}\n")


# ---------------------------------------------------------------- the two worlds

class Worlds:
    """One LXD daemon per engine, prepared alike; `lxc_both` changes both identically."""

    def __init__(self, work: Path):
        self.lxd = load_module("lxd_harness", REPO / "tests/lxd.py")
        self.dirs = {"tf": work / "t", "nv": work / "n"}
        self.daemons, self.made = {}, {}
        for who, d in self.dirs.items():
            self.daemons[who] = self.lxd.start(d)
            lxd_dir = Path(self.daemons[who]["lxdDir"])
            self.lxd.lxc(lxd_dir, "storage", "create", "other", "dir")
            image = json.loads(self.lxd.lxc(lxd_dir, "image", "list", "--format", "json"))[0]["fingerprint"]
            self.lxd.lxc(lxd_dir, "image", "alias", "create", "busybox2", image)

    def fresh(self, name: str) -> str:
        """`name`, or `name-2`... when a cycle makes several objects to import."""
        self.made[name] = self.made.get(name, 0) + 1
        return name if self.made[name] == 1 else f"{name}-{self.made[name]}"

    def socket(self, who: str) -> str:
        return self.daemons[who]["socket"]

    def lxc(self, who: str, *args: str, stdin: str | None = None) -> str:
        return self.lxd.lxc(Path(self.daemons[who]["lxdDir"]), *args, stdin=stdin)

    def lxc_both(self, *args: str, stdin: str | None = None):
        for who in self.dirs:
            self.lxc(who, *args, stdin=stdin)

    def seen(self, who: str) -> dict:
        """What the daemon holds: profiles, custom volumes of both pools and containers."""
        q = lambda path: json.loads(self.lxc(who, "query", path))  # noqa: E731
        out = {}
        for p in q("/1.0/profiles?recursion=1"):
            if p["name"] != "default":
                out[f"profile {p['name']}"] = {"config": p["config"], "description": p["description"]}
        for pool in ("default", "other"):
            for v in q(f"/1.0/storage-pools/{pool}/volumes/custom?recursion=1"):
                out[f"volume {pool}/{v['name']}"] = {"config": v["config"]}
        for c in q("/1.0/instances?recursion=1"):
            user = {k: v for k, v in c["config"].items() if k.startswith("user.")}
            out[f"container {c['name']}"] = {"config": user, "profiles": c["profiles"], "status": c["status"]}
        return out

    def stop(self):
        for d in self.dirs.values():
            self.lxd.stop(d)


def both(tf_call, nv_call):
    """Runs the two engines' steps at once (their daemons are independent)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        t, n = pool.submit(tf_call), pool.submit(nv_call)
        return t.result(), n.result()


class Engines:
    def __init__(self, work: Path, nivis: str, world: Worlds):
        self.world, self.nivis = world, nivis
        self.provider, self.terraform = fetch("lxd"), fetch("terraform")
        mirror = work / "tf-mirror/registry.terraform.io/terraform-lxd/lxd/1.5.0/linux_amd64"
        mirror.mkdir(parents=True)
        os.symlink(self.provider, mirror / "terraform-provider-lxd_v1.5.0")
        tfrc = work / "terraform.tfrc"
        tfrc.write_text("provider_installation {\n  filesystem_mirror {\n"
                        f"    path = {json.dumps(str(work / 'tf-mirror'))}\n"
                        '    include = ["registry.terraform.io/terraform-lxd/lxd"]\n  }\n}\n')
        base = {k: v for k, v in os.environ.items() if not k.startswith("TF_") and k != "NIVIS_LOG"}
        self.tf_env = dict(base, TF_CLI_CONFIG_FILE=str(tfrc), CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1")
        self.nivis_env = dict(base, NO_COLOR="1")
        self.tf_dir, self.nv_dir = work / "terraform", work / "nivis"
        self.tf_dir.mkdir()
        self.nv_dir.mkdir()

    def write(self, config: dict):
        (self.tf_dir / "main.tf.json").write_text(json.dumps(terraform_config(config, self.world.socket("tf")), indent=1))
        (self.nv_dir / "plan.nix").write_text(nivis_plan(config, self.provider, self.world.socket("nv")))

    def tf(self, sub, *args):
        return difftest.run([self.terraform, sub, "-input=false", "-no-color", *args], self.tf_dir, self.tf_env)

    def nv(self, verb, *args):
        d = self.nv_dir
        return difftest.run([self.nivis, verb, "--file", str(d / "plan.nix"), "--state", str(d / "state.json"), *args],
                            d, self.nivis_env)

    def tf_imports(self, config: dict) -> str | None:
        """`terraform import` of every declared import not yet in Terraform's state (after a copy
        of the state for an undo); the error of the first refused one."""
        state = self.tf_dir / "terraform.tfstate"
        if state.exists():
            shutil.copy2(state, self.tf_dir / "undo.tfstate")
        else:
            (self.tf_dir / "undo.tfstate").unlink(missing_ok=True)
        recorded = self.tf_addresses()
        for slot, r in list(config["prof"].items()) + list(config["vol"].items()):
            addr = f"{kind_of(slot)}.{slot}"
            if r.get("imp") and addr not in recorded:
                out = self.tf("import", addr, r["imp"])
                if out.returncode != 0:
                    return out.stderr.strip().splitlines()[0] if out.stderr.strip() else out.stdout[-300:]
        return None

    def tf_undo(self):
        undo, state = self.tf_dir / "undo.tfstate", self.tf_dir / "terraform.tfstate"
        if undo.exists():
            shutil.copy2(undo, state)
        else:
            state.unlink(missing_ok=True)

    def tf_addresses(self) -> set:
        state = self.tf_dir / "terraform.tfstate"
        if not state.exists():
            return set()
        doc = json.loads(state.read_text())
        return {f"{r['type']}.{r['name']}" for r in doc["resources"] if r["mode"] == "managed"}

    def tf_plan(self):
        """Planned actions per address, or ("failed", first error line)."""
        r = self.tf("plan", "-out=tf.plan")
        if r.returncode != 0:
            return ("failed", error_line(r.stderr or r.stdout))
        doc = json.loads(difftest.run([self.terraform, "show", "-json", "tf.plan"], self.tf_dir, self.tf_env).stdout)
        out = {}
        for c in doc.get("resource_changes", []):
            cls = difftest.tf_class(c["change"]["actions"])
            if c["mode"] == "managed" and cls not in ("no-op", "read"):
                out[c["address"]] = cls
        return out

    def nv_plan(self):
        """Planned actions per (Terraform) address and the addresses imported, or ("failed", line)."""
        r = self.nv("plan", "--json")
        if r.returncode != 0:
            events = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
            failed = [f"Error [{e['id']}]: {d['summary']}" for e in events if e.get("type") == "failed"
                      for d in e.get("diagnostics", [])]
            errors = [e.get("message", "") for e in events if e.get("type") == "error"]
            return ("failed", error_line("\n".join(failed + errors) or r.stderr)), []
        out, imported = {}, []
        for line in r.stdout.splitlines():
            e = json.loads(line)
            addr = e.get("id", "").removeprefix("lxd.")
            if e.get("type") == "planned" and not e.get("deposed"):
                cls = difftest.nivis_class(e["action"])
                if cls not in ("no-op", "read"):
                    out[addr] = cls
            elif e.get("type") == "imported":
                imported.append(addr)
            elif e.get("type") == "deferred":
                out[addr] = "deferred"
        return out, sorted(imported)

    def states(self) -> tuple[dict, dict]:
        """The compared attributes of every address in each tool's state."""
        keep = ("name", "description", "config", "pool", "profiles", "image")
        tf = json.loads((self.tf_dir / "terraform.tfstate").read_text())
        tf_objs = {f"{r['type']}.{r['name']}": r["instances"][0]["attributes"]
                   for r in tf["resources"] if r["mode"] == "managed" and r["instances"]}
        out = difftest.run([self.nivis, "output", "--json", "--state", str(self.nv_dir / "state.json")],
                           self.nv_dir, self.nivis_env)
        nv_objs = {k.removeprefix("lxd."): v for k, v in json.loads(out.stdout)["resources"].items()}
        pick = lambda objs: {a: {k: o.get(k) or None for k in keep if k in o} for a, o in objs.items()}  # noqa: E731
        return pick(tf_objs), pick(nv_objs)


def error_line(text: str) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return next((x for x in lines if x.startswith("Error")), lines[0] if lines else "")[:200]


# ---------------------------------------------------------------- one cycle

def plans(e: Engines, config: dict) -> tuple:
    """Terraform's imports and plan beside Nivis's plan: (tf_plan, nv_plan, nv_imports,
    expected imports). An import is expected where nothing is recorded yet: on a recorded
    address `importId` does nothing, and the harness does not run `terraform import`."""
    recorded = e.tf_addresses()
    expected = sorted(a for a in (f"{kind_of(s)}.{s}" for s, r in list(config["prof"].items()) +
                                  list(config["vol"].items()) if r.get("imp")) if a not in recorded)

    def tf_side():
        refused = e.tf_imports(config)
        return ("failed", f"import: {refused}") if refused else e.tf_plan()
    tf_plan, (nv_plan, nv_imports) = both(tf_side, e.nv_plan)
    return tf_plan, nv_plan, nv_imports, expected


def forget_deleted(e: Engines, gone: str):
    """Both forget the record of an object deleted out of band."""
    t, n = both(lambda: difftest.run([e.terraform, "state", "rm", gone], e.tf_dir, e.tf_env),
                lambda: difftest.run([e.nivis, "state", "rm", f"lxd.{gone}", "--state", str(e.nv_dir / "state.json")],
                                     e.nv_dir, e.nivis_env))
    if t.returncode or n.returncode:
        raise RuntimeError(f"state rm {gone}: terraform {t.stderr.strip()} / nivis {n.stderr.strip()}")


def compare_plans(cycle, what, tf_plan, nv_plan, nv_imports, expected, differences) -> bool:
    """Records a difference of the plans; True when both plans succeeded."""
    tf_failed, nv_failed = isinstance(tf_plan, tuple), isinstance(nv_plan, tuple)
    if tf_failed or nv_failed:
        if tf_failed != nv_failed:
            differences.append((cycle, what, "plan refused by one", tf_plan, nv_plan))
        return False
    if tf_plan != nv_plan:
        differences.append((cycle, what, "plan", tf_plan, nv_plan))
    if nv_imports != expected:
        differences.append((cycle, what, "imports", expected, nv_imports))
    return True


REACHED: collections.Counter = collections.Counter()  # what the run's cycles made happen


def run_cycle(e: Engines, config: dict, before: dict, what: str, gone, cycle: int,
              differences: list, explained: list, undoing: bool = False) -> dict:
    """Plan, compare, apply, compare worlds, states and second plans; returns the configuration
    in effect (`before` when the plans are refused or the applies fail in both)."""
    e.write(config)
    tf_plan, nv_plan, nv_imports, expected = plans(e, config)
    if gone and isinstance(tf_plan, tuple) and isinstance(nv_plan, tuple):
        print(f"cycle {cycle}: both plans fail on the deleted {gone} (tf: {tf_plan[1]} / nivis: {nv_plan[1]}); "
              "both forget it", flush=True)
        REACHED["plans fail alike on a deleted object"] += 1
        e.tf_undo()
        forget_deleted(e, gone)
        tf_plan, nv_plan, nv_imports, expected = plans(e, config)
    if not compare_plans(cycle, what, tf_plan, nv_plan, nv_imports, expected, differences):
        if isinstance(tf_plan, tuple) and isinstance(nv_plan, tuple):
            explained.append((cycle, what, f"both refuse: {tf_plan[1]} / {nv_plan[1]}"))
            REACHED["refused alike: " + ("import" if "import" in tf_plan[1] else "prevent_destroy"
                                         if "cannot be destroyed" in tf_plan[1] else tf_plan[1])] += 1
            print(f"cycle {cycle}: {what}: both refuse, edits undone\n  terraform: {tf_plan[1]}\n"
                  f"  nivis:     {nv_plan[1]}", flush=True)
            e.tf_undo()
            drop_refused_imports(e, config, before)
            e.write(before)
            return before
        raise StopIteration
    tf_apply, nv_apply = both(lambda: e.tf("apply", "-auto-approve", "tf.plan"),
                              lambda: e.nv("apply", "--auto-approve"))
    tf_ok, nv_ok = tf_apply.returncode == 0, nv_apply.returncode == 0
    if not tf_ok and nv_ok and deleted_while_used(before, config, tf_plan, tf_apply.stderr):
        explained.append((cycle, what, "a profile removed or replaced with the container's use of it: "
                                       "Terraform deletes first"))
        REACHED["documented: profile deleted before its user is updated (Terraform)"] += 1
        print(f"cycle {cycle}: {what}: Terraform deletes the profile before updating the container "
              "(documented); it converges with -target, then a full apply", flush=True)
        tf_ok = converge_terraform(e)
    elif not tf_ok and not nv_ok and deleted_while_used(before, config, tf_plan, tf_apply.stderr):
        # The same order, both failing: Terraform at the profile's delete, Nivis a step later
        # (the create of a replacement whose name is taken). Terraform's user's next steps
        # bring its world to the same point; then both are undone as any failure alike.
        explained.append((cycle, what, "a profile removed or replaced with the container's use of it: "
                                       "Terraform deletes first (both fail)"))
        REACHED["documented: profile deleted before its user is updated (Terraform; both fail)"] += 1
        converge_terraform(e)
    if tf_ok != nv_ok:
        differences.append((cycle, what, "apply", tf_apply.stdout[-400:] + tf_apply.stderr[-600:],
                            nv_apply.stdout[-400:] + nv_apply.stderr[-600:]))
        raise StopIteration
    compare_worlds(e, cycle, what, differences)
    if not tf_ok:
        why = f"{error_line(tf_apply.stderr)} / {error_line(nv_apply.stderr or nv_apply.stdout)}"
        explained.append((cycle, what, f"both applies fail: {why}"))
        REACHED[f"applies fail alike: {error_line(tf_apply.stderr)[:60]}"] += 1
        print(f"cycle {cycle}: {what}: both applies fail ({why}); undone", flush=True)
        if undoing:
            differences.append((cycle, what, "the undo of a failed apply fails too", why, ""))
            raise StopIteration
        return run_cycle(e, before, before, f"undo of cycle {cycle}", None, cycle, differences, explained, True)
    clean = {**copy.deepcopy(config)}
    for r in list(clean["prof"].values()) + list(clean["vol"].values()):
        r["imp"] = None  # imported: the entries are done
    e.write(clean)
    tf_again, nv_again = both(lambda: e.tf("plan", "-detailed-exitcode").returncode,
                              lambda: e.nv("plan", "--detailed-exitcode").returncode)
    if (tf_again, nv_again) != (0, 0):
        differences.append((cycle, what, "second plan exit", tf_again, nv_again))
    for addr, action in tf_plan.items():
        REACHED[f"{addr.split('.')[0]} {action}"] += 1
    for addr in nv_imports:
        REACHED[f"{addr.split('.')[0]} imported"] += 1
    print(f"cycle {cycle}: {what}: {len(tf_plan)} change(s) {sorted(tf_plan.items())}", flush=True)
    return clean


def deleted_while_used(before: dict, config: dict, tf_plan: dict, tf_error: str) -> bool:
    """Documented (DESIGN §110): a profile removed (or replaced destroy-first) in the same cycle
    as the container's use of it. Terraform 1.0.3 orders the delete before the update of what
    its state says depended on it, and LXD refuses to delete a profile in use; Nivis deletes
    what is no longer declared at the fixpoint, after every create and update, and a
    replacement after the update of what stopped reading it, so its apply succeeds. True when
    that explains Terraform's failure (the plans were compared equal before)."""
    used = before["ct"]["prof"] if before["ct"] else None
    still = config["ct"]["prof"] if config["ct"] else None
    return (used is not None and still != used and "Profile is currently in use" in tf_error
            and tf_plan.get(f"lxd_profile.{used}") in ("delete", "replace"))


def converge_terraform(e: Engines) -> bool:
    """What a Terraform user does then: apply the container first (`-target`), then the rest."""
    first = e.tf("apply", "-auto-approve", f"-target=lxd_container.{CT}")
    return first.returncode == 0 and e.tf("apply", "-auto-approve").returncode == 0


def compare_worlds(e: Engines, cycle: int, what: str, differences: list):
    tf_world, nv_world = both(lambda: e.world.seen("tf"), lambda: e.world.seen("nv"))
    if tf_world != nv_world:
        differences.append((cycle, what, "LXD objects", tf_world, nv_world))
    tf_state, nv_state = e.states()
    if tf_state != nv_state:
        differences.append((cycle, what, "state", tf_state, nv_state))


def drop_refused_imports(e: Engines, config: dict, before: dict):
    """A refused volume import leaves its lxc-made volume: deleted in both (it is not declared)."""
    for slot, v in config["vol"].items():
        if v.get("imp") and slot not in before["vol"]:
            e.world.lxc_both("storage", "volume", "delete", "default", v["imp"])  # where `edit` made it


def compare_refresh_only(e: Engines, cycle: int, differences: list):
    """After drift: both refresh-only plans see it (or both fail on a deleted object)."""
    tf, nv = both(lambda: e.tf("plan", "-refresh-only"), lambda: e.nv("plan", "--refresh-only", "--detailed-exitcode"))
    tf_seen = "failed" if tf.returncode else "drift" if "changed outside of Terraform" in tf.stdout else "none"
    nv_seen = {0: "none", 2: "drift"}.get(nv.returncode, "failed")
    if tf_seen != nv_seen:
        differences.append((cycle, "refresh-only", "drift seen", tf_seen + " " + tf.stdout[-300:], nv_seen))
    print(f"cycle {cycle}: refresh-only plans: {tf_seen} in both" if tf_seen == nv_seen else
          f"cycle {cycle}: refresh-only plans differ", flush=True)


def main(argv) -> int:
    ap = difftest.arguments()
    args = ap.parse_args(argv)
    if args.seeds:
        return difftest.long_run(args, Path(__file__))
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="nvo-"))  # short: the daemons' socket paths
    os.chmod(work, 0o711)
    differences, explained = [], []
    world = None
    try:
        world = Worlds(work)
        e = Engines(work, args.nivis, world)
        config = {"prof": {}, "vol": {}, "ct": None}
        e.write(config)
        r = e.tf("init")
        if r.returncode != 0:
            raise SystemExit(f"terraform init failed:\n{r.stdout}{r.stderr}")
        for cycle in range(args.cycles):
            gone = None
            if cycle and rng.random() < 0.4:
                done, gone = drift(config, rng, world)
                REACHED[done.split(" ", 1)[1].rsplit(" ", 2 if " set " in done or "unset" in done else 1)[0]] += 1
                print(f"cycle {cycle}: {done}", flush=True)
                compare_refresh_only(e, cycle, differences)
            before = copy.deepcopy(config)
            if cycle == 0:
                config, what = initial(rng), "initial"
            else:
                what = ", ".join(edit(config, rng, world, cycle) for _ in range(rng.randint(1, 3)))
            try:
                config = run_cycle(e, config, before, what, gone, cycle, differences, explained)
            except StopIteration:
                break
    finally:
        if world:
            world.stop()
        if args.keep or differences:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    for d in differences:
        print("DIFFERENCE cycle %d (%s), %s:\n  terraform: %s\n  nivis:     %s" % d)
    for cycle, what, why in explained:
        print(f"alike in both, cycle {cycle} ({what}): {why}")
    print("reached: " + "; ".join(f"{k} {v}" for k, v in sorted(REACHED.items())))
    print(f"{args.cycles} cycle(s), seed {args.seed}: {len(differences)} difference(s), "
          f"{len(explained)} refusal(s) or failure(s) alike")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

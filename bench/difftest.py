#!/usr/bin/env python3
"""Differential test: Nivis and Terraform 1.0.3 on the same real null provider (2.1.2).

A seeded generator edits one configuration cycle after cycle (null_resource triggers, references
between resources and to a null_data_source, create_before_destroy, resources added and
removed, a count family of 0-4 instances grown and shrunk, renames; since issue 50 also a
for_each family over a map with keys added, removed and renamed, ignore_changes, prevent_destroy,
forgets, the data source's depends_on, -target cycles and refresh-only plans, DESIGN §100); each
cycle both engines plan, apply and plan again, and this compares:

  * the planned action of every address (create, update, replace in either order, delete);
    a count instance is null_resource.c[i] in Terraform and null.null_resource.c__i
    (`lib.count`) in Nivis,
  * that a rename planned by Nivis (`lib.moved`, kept for the cycle of the rename) is the one
    the harness made; Terraform 1.0.3 has no `moved` blocks (1.1 added them), so the harness
    renames its state with `terraform state mv` before planning, and both must then plan the
    same (no replacement of the renamed object),
  * that both apply, and that both second plans are no-ops (`--detailed-exitcode` 0),
  * the final states: the same addresses with the same triggers, ids replaced by the address
    of the object they name (the two engines' random ids differ).

Documented differences (docs/DESIGN.md §57): when Terraform refuses a plan with `Error: Cycle`
(some create_before_destroy graphs), the cycle is recorded as such, nothing is applied and
the edits are undone. Terraform propagates create_before_destroy from a `count = 0` block to
what it references (`lib.count 0` declares nothing in Nivis): recorded too. Values Nix computes (`lib.str`, `compute`) are deferred by Nivis,
planned by Terraform; the generator uses plain references only. A data source whose depends_on
names a changing resource is read at apply by Terraform (its readers replaced) and after that
resource by Nivis (its readers planned by the value read): recorded (§100). With -target,
Terraform deletes the removed instances of a shrunk family the target depends on; Nivis leaves
them to the next untargeted apply: recorded (§108). Terraform's
refresh-only `-detailed-exitcode` may be 2 with "No changes.": its words are compared.

Usage: bench/difftest.py [--provider null|lxd] [--cycles N] [--seed S | --seeds A-B [--jobs J]
[--logs DIR]] [--nivis PATH]. `--provider lxd` is the LXD oracle (bench/difftest_lxd.py, DESIGN §110):
the real lxd provider on two real LXD daemons, with imports and drift made outside both tools.
Exits 1 on any difference not documented.
The providers are fetched pinned and verified by tests/fetch-providers.py; Terraform installs
the null provider offline from a filesystem mirror. A long run: bench/difftest.py --cycles 500.
"""

import argparse
import copy
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NAMES = [f"r{i}" for i in range(5)]
FAMILY = "c"  # the count family: null_resource.c[i] in Terraform, null.null_resource.c__i in Nivis
EACH = "f"  # the for_each family: null_resource.f["ka"] in Terraform, null.null_resource.f__ka in Nivis
KEYS = ["ka", "kb", "kc", "kd"]
DATA = "d"  # the data source, as a node of the reference graph


def fetch_binaries() -> dict:
    out = subprocess.run(
        [sys.executable, str(REPO / "tests/fetch-providers.py"), "--only", "null,terraform", "--print-env"],
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    paths = {}
    for line in out.splitlines():
        m = re.match(r"export (\w+)=(.*)$", line.strip())
        if m:
            paths[m.group(1)] = shlex.split(m.group(2))[0]
    return paths


def successors(config: dict, node: str) -> list:
    """What `node` (a resource name, FAMILY, EACH or DATA) references directly."""
    if node == DATA:
        return [config["d_dep"]] if config["d_dep"] else []
    r = config["family"] if node == FAMILY else config["each"] if node == EACH else config["res"].get(node)
    if not r:
        return []
    return ([r["ref"]] if r["ref"] else []) + ([DATA] if r.get("data") else [])


def depends_on(config: dict, node: str, target: str) -> bool:
    """Whether `node` reaches `target` through references (and the data source's dependsOn)."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n == target:
            return True
        if n not in seen:
            seen.add(n)
            todo.extend(successors(config, n))
    return False


def families(config: dict) -> list:
    return [f for f in (config["family"], config["each"]) if f]


def drop_refs_to(config: dict, gone: str):
    for other in list(config["res"].values()) + families(config):
        if other["ref"] == gone:
            other["ref"] = None
    if config["d_dep"] == gone:
        config["d_dep"] = None


def edit_family(config: dict, rng: random.Random) -> str:
    """A count family: N instances of one resource (`count` / `lib.count`), N edited up and down."""
    fam = config["family"]
    if fam is None:
        config["family"] = {"n": rng.randint(1, 3), "v": 0, "ref": None, "cbd": False}
        return f"family {FAMILY} x{config['family']['n']}"
    kind = rng.choice(["grow", "shrink", "value", "ref", "cbd"])
    if kind == "grow":
        fam["n"] = min(fam["n"] + rng.randint(1, 2), 4)
    elif kind == "shrink":
        fam["n"] = max(fam["n"] - rng.randint(1, 2), 0)
        if fam["n"] == 0:
            drop_refs_to(config, FAMILY)
    elif kind == "value":
        fam["v"] = (fam["v"] + 1) % 3
    elif kind == "ref":
        free = [m for m in config["res"] if not depends_on(config, m, FAMILY)]
        fam["ref"] = rng.choice(free) if free and rng.random() < 0.8 else None
    else:
        fam["cbd"] = not fam["cbd"]
    return f"{FAMILY} {kind} (x{fam['n']})"


def edit_each(config: dict, rng: random.Random, moves: list, before: dict, recorded: set) -> str:
    """A for_each family over a map (`for_each` / `lib.forEach`): keys added, removed, renamed
    (`lib.moved` in Nivis, `terraform state mv` for Terraform), values changed."""
    each = config["each"]
    if each is None:
        keys = rng.sample(KEYS, rng.randint(1, 2))
        config["each"] = {"keys": {k: rng.randint(0, 2) for k in keys}, "ref": None}
        return f"each {EACH} {sorted(keys)}"
    applied = {k for k in before["each"]["keys"] if f"{EACH}[{k}]" in recorded} if before["each"] else set()
    moved_now = {m for pair in moves for m in pair}
    kind = rng.choice(["add", "remove", "rename", "value", "ref"])
    present = [k for k in KEYS if k in each["keys"]]
    absent = [k for k in KEYS if k not in each["keys"] and f"{EACH}__{k}" not in moved_now]
    if kind == "add" and absent:
        k = rng.choice(absent)
        each["keys"][k] = rng.randint(0, 2)
        return f"{EACH} add key {k}"
    if kind == "remove" and present:
        k = rng.choice(present)
        del each["keys"][k]
        return f"{EACH} remove key {k}"
    if kind == "rename":
        old = [k for k in present if k in applied and f"{EACH}__{k}" not in moved_now]
        new = [k for k in absent if k not in applied]
        if old and new:
            a, b = rng.choice(old), rng.choice(new)
            each["keys"][b] = each["keys"].pop(a)
            moves.append((f"{EACH}__{a}", f"{EACH}__{b}"))
            return f"{EACH} rename key {a} -> {b}"
    if kind == "ref":
        free = [m for m in config["res"] if not depends_on(config, m, EACH)]
        each["ref"] = rng.choice(free) if free and rng.random() < 0.8 else None
        return f"{EACH} ref"
    if present:
        k = rng.choice(present)
        each["keys"][k] = (each["keys"][k] + 1) % 3
        return f"{EACH} value {k}"
    return f"{EACH} unchanged"


def rename(config: dict, rng: random.Random, moves: list, applied: set) -> str:
    """Rename an applied resource to a name free in the configuration and the state: `lib.moved`
    in Nivis, `terraform state mv` by the harness for Terraform (1.0.3 has no `moved` blocks)."""
    moved_now = {m for pair in moves for m in pair}
    present = [n for n in NAMES if n in config["res"] and n in applied and n not in moved_now]
    absent = [n for n in NAMES if n not in config["res"] and n not in applied and n not in moved_now]
    if not present or not absent:
        return "rename skipped"
    old, new = rng.choice(present), rng.choice(absent)
    config["res"][new] = config["res"].pop(old)
    for other in list(config["res"].values()) + families(config):
        if other["ref"] == old:
            other["ref"] = new
    if config["d_dep"] == old:
        config["d_dep"] = new
    moves.append((old, new))
    return f"rename {old} -> {new}"


def edit(config: dict, rng: random.Random, moves: list, forgets: list, before: dict, recorded: set) -> str:
    """One random edit of `config`: {"res": {name: {v, ref, data, cbd, ign, pd}}, "k" for the data
    source and "d_dep" for its dependsOn, "family": {n, v, ref, cbd} or None, "each": {keys, ref}
    or None}. A rename is appended to `moves` as (old, new), a forgotten resource (`lib.removed {
    destroy = false; }`, `terraform state rm`) to `forgets`; `before` is the configuration of
    the last cycle and `recorded` the resources in Terraform's state (a `-target` cycle leaves
    the others of `before` unapplied: neither engine can rename or forget those)."""
    applied = set(before["res"]) & recorded
    present = [n for n in NAMES if n in config["res"]]
    # A name renamed away or forgotten this cycle stays free (Nivis refuses a move whose `from`,
    # or a removal whose resource, is declared).
    gone = {old for old, _ in moves} | set(forgets)
    absent = [n for n in NAMES if n not in config["res"] and n not in gone]
    kind = rng.choice(["value", "value", "ref", "cbd", "data", "add", "remove", "family", "family", "rename",
                       "each", "each", "ignore", "prevent", "forget", "ddep"])
    if kind == "family":
        return edit_family(config, rng)
    if kind == "each":
        return edit_each(config, rng, moves, before, recorded)
    if kind == "rename" and present:
        return rename(config, rng, moves, applied)
    if kind == "add" and absent or not present:
        if not absent:
            return "add skipped"
        n = rng.choice(absent)
        config["res"][n] = {"v": rng.randint(0, 3), "ref": None, "data": False, "cbd": False, "ign": False, "pd": False}
        return f"add {n}"
    n = rng.choice(present)
    r = config["res"][n]
    if kind == "value":
        r["v"] = (r["v"] + 1) % 4
    elif kind == "ref":
        fam = [FAMILY] if config["family"] and config["family"]["n"] > 0 else []
        free = [m for m in present + fam if m != n and not depends_on(config, m, n)]
        r["ref"] = rng.choice(free) if free and rng.random() < 0.8 else None
    elif kind == "cbd":
        r["cbd"] = not r["cbd"]
    elif kind == "ignore":
        r["ign"] = not r["ign"]
    elif kind == "prevent":
        r["pd"] = not r["pd"]
    elif kind == "data":
        if rng.random() < 0.5:
            if r["data"] or not depends_on(config, DATA, n):
                r["data"] = not r["data"]
        else:
            config["k"] = (config["k"] + 1) % 3
    elif kind == "ddep":
        free = [m for m in present if not depends_on(config, m, DATA)]
        config["d_dep"] = rng.choice(free) if free and rng.random() < 0.7 else None
        return f"data dependsOn {config['d_dep']}"
    elif kind == "forget":
        moved_now = {m for pair in moves for m in pair}
        if n not in applied or n in moved_now:
            return "forget skipped"
        del config["res"][n]
        drop_refs_to(config, n)
        forgets.append(n)
    elif kind == "remove":
        del config["res"][n]
        drop_refs_to(config, n)
    return f"{kind} {n}"


def tf_name(name: str) -> str:
    """A Nivis name (r1, c__2, f__ka) as Terraform's address within null_resource (r1, c[2], f["ka"])."""
    m = re.fullmatch(r"(\w+?)__(\w+)", name)
    if not m:
        return name
    return f"{m.group(1)}[{m.group(2)}]" if m.group(2).isdigit() else f'{m.group(1)}["{m.group(2)}"]'


def tf_ref(name: str) -> str:
    return "${null_resource.%s.id}" % (f"{FAMILY}[0]" if name == FAMILY else name)


def tf_lifecycle(r: dict, ignored: str = 'triggers["v"]') -> dict:
    """The lifecycle block of resource `r`; `ignored`: what its ignore_changes names."""
    life = {}
    if r.get("cbd"):
        life["create_before_destroy"] = True
    if r.get("ign"):
        life["ignore_changes"] = [ignored]
    if r.get("pd"):
        life["prevent_destroy"] = True
    return {"lifecycle": life} if life else {}


def terraform_config(config: dict) -> dict:
    res = {}
    for n, r in config["res"].items():
        trig = {"v": str(r["v"])}
        if r["ref"]:
            trig["ref"] = tf_ref(r["ref"])
        if r["data"]:
            trig["k"] = "${data.null_data_source.d.outputs.k}"
        res[n] = {"triggers": trig, **tf_lifecycle(r)}
    fam = config["family"]
    if fam is not None:
        trig = {"v": str(fam["v"]), "i": "${count.index}"}
        if fam["ref"]:
            trig["ref"] = tf_ref(fam["ref"])
        res[FAMILY] = {"count": fam["n"], "triggers": trig, **tf_lifecycle(fam)}
    each = config["each"]
    if each is not None:
        trig = {"v": "${each.value}", "key": "${each.key}"}
        if each["ref"]:
            trig["ref"] = tf_ref(each["ref"])
        res[EACH] = {"for_each": {k: str(v) for k, v in each["keys"].items()}, "triggers": trig}
    tf = {"required_providers": {"null": {"source": "hashicorp/null", "version": "2.1.2"}}}
    d = {"inputs": {"k": f"k{config['k']}"}}
    if config["d_dep"]:
        d["depends_on"] = [f"null_resource.{config['d_dep']}"]
    doc = {"terraform": tf, "data": {"null_data_source": {"d": d}}}
    if res:
        doc["resource"] = {"null_resource": res}
    return doc


def nv_ref(name: str) -> str:
    return f'(builtins.elemAt {FAMILY} 0).refAttr "id"' if name == FAMILY else f'{name}.refAttr "id"'


def nv_lifecycle(r: dict, ignored: str = "triggers.v") -> str:
    """The lifecycle attribute of resource `r`; `ignored`: what its ignoreChanges names."""
    life = []
    if r.get("cbd"):
        life.append("createBeforeDestroy = true;")
    if r.get("ign"):
        life.append(f"ignoreChanges = [ {json.dumps(ignored)} ];")
    if r.get("pd"):
        life.append("preventDestroy = true;")
    return f"lifecycle = {{ {' '.join(life)} }};" if life else ""


def nivis_plan(config: dict, null: str, moves: list, forgets: list) -> str:
    dep = f"dependsOn = [ {config['d_dep']} ];" if config["d_dep"] else ""
    binds = [f'd = lib.mkData {{ provider = "null"; type = "null_data_source"; name = "d"; config.inputs = {{ k = "k{config["k"]}"; }}; {dep} }};']
    for n, r in config["res"].items():
        trig = [f'v = "{r["v"]}";']
        if r["ref"]:
            trig.append(f'ref = {nv_ref(r["ref"])};')
        if r["data"]:
            trig.append('k = d.ref [ "outputs" "k" ];')
        binds.append(f'{n} = lib.mkResource {{ provider = "null"; type = "null_resource"; name = "{n}"; config.triggers = {{ {" ".join(trig)} }}; {nv_lifecycle(r)} }};')
    names = list(config["res"])
    fam = config["family"]
    if fam is not None:
        trig = [f'v = "{fam["v"]}";', "i = toString i;"]
        if fam["ref"]:
            trig.append(f'ref = {nv_ref(fam["ref"])};')
        binds.append(f'{FAMILY} = lib.count {fam["n"]} (i: lib.mkResource {{ provider = "null"; type = "null_resource"; name = "{FAMILY}"; config.triggers = {{ {" ".join(trig)} }}; {nv_lifecycle(fam)} }});')
        names.append(FAMILY)
    each = config["each"]
    if each is not None:
        keys = " ".join(f'{k} = "{v}";' for k, v in each["keys"].items())
        trig = ["v = value;", "key = key;"] + ([f'ref = {nv_ref(each["ref"])};'] if each["ref"] else [])
        binds.append(f'{EACH} = lib.forEach {{ {keys} }} (key: value: lib.mkResource {{ provider = "null"; type = "null_resource"; name = "{EACH}"; config.triggers = {{ {" ".join(trig)} }}; }});')
        names.append(EACH)
    moved = " ".join(f'(lib.moved {{ from = "null.null_resource.{old}"; to = "null.null_resource.{new}"; }})' for old, new in moves)
    removed = " ".join(f'(lib.removed {{ from = "null.null_resource.{n}"; destroy = false; }})' for n in forgets)
    return (
        f"let lib = import {REPO}/nix; in ledger: let {' '.join(binds)} in lib.toIR {{ "
        f'providers.null = lib.mkProvider {{ source = "{null}"; }}; '
        f"resources = [ {' '.join(names)} ]; data = [ d ]; moved = [ {moved} ]; removed = [ {removed} ]; inherit ledger; }}\n"
    )


def run(argv, cwd, env):
    return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def empty_family_cbd(config: dict, tf_plan: dict, nv_plan: dict) -> bool:
    """Documented (DESIGN §57): Terraform propagates create_before_destroy from a resource block
    with `count = 0` to what it references; `lib.count 0` makes no node in Nivis, so nothing
    propagates. True when that explains every difference: those resources are replace-cbd in
    Terraform and replace in Nivis, all else equal."""
    fam = config["family"]
    if not fam or fam["n"] != 0 or not fam["cbd"]:
        return False
    reached, node = set(), fam["ref"]
    while node and node not in reached:
        reached.add(f"null_resource.{node}")
        reached.add(node)
        node = config["res"][node]["ref"] if node in config["res"] else None
    for addr in set(tf_plan) | set(nv_plan):
        t, n = tf_plan.get(addr), nv_plan.get(addr)
        if t != n and not (addr in reached and (t, n) == ("replace-cbd", "replace")):
            return False
    return True


def targeted_family_orphans(config: dict, target, tf_plan: dict, nv_plan: dict) -> bool:
    """Documented (DESIGN §108): with `-target`, Terraform includes every instance of a resource
    block the target depends on, so it deletes the instances a shrunk `count` or `for_each` no
    longer declares; Nivis targets the instances the target references (and what they
    reference), so those deletions wait for the next untargeted apply. True when that explains
    every difference: deletions in Terraform, absent in Nivis, of a family the target reaches."""
    if not target:
        return False
    for addr in set(tf_plan) | set(nv_plan):
        t, n = tf_plan.get(addr), nv_plan.get(addr)
        family = next((f for f in (FAMILY, EACH) if addr.startswith(f"null_resource.{f}[")), None)
        if t != n and not (t == "delete" and n is None and family and depends_on(config, target, family)):
            return False
    return True


def data_read_deferred(config: dict, tf_plan: dict, nv_plan: dict) -> bool:
    """Documented (DESIGN §100): when the data source's `depends_on` names a resource with a
    planned change, Terraform 1.0.3 reads it only during apply, so what reads its outputs
    (directly or through references) sees `(known after apply)` and is replaced or updated;
    Nivis reads it after that resource is applied and plans by the value read (unchanged here:
    null_data_source's `outputs.k` is its input). True when that explains every difference:
    resources that reach the data source, changed in Terraform, unchanged in Nivis."""
    dep = config["d_dep"]
    if not dep or f"null_resource.{dep}" not in tf_plan:
        return False
    for addr in set(tf_plan) | set(nv_plan):
        t, n = tf_plan.get(addr), nv_plan.get(addr)
        name = re.sub(r"\[.*\]$", "", addr.removeprefix("null_resource."))
        if t != n and not (n is None and depends_on(config, name, DATA)):
            return False
    return True


def tf_address(nivis_id: str) -> str:
    """null.null_resource.c__2 (an instance of lib.count) -> null_resource.c[2], Terraform's address
    (null.null_resource.f__ka, of lib.forEach -> null_resource.f["ka"])."""
    ty, name = nivis_id.removeprefix("null.").rsplit(".", 1)
    return f"{ty}.{tf_name(name)}"


def tf_class(actions: list) -> str:
    return {("create",): "create", ("update",): "update", ("delete",): "delete",
            ("delete", "create"): "replace", ("create", "delete"): "replace-cbd",
            ("no-op",): "no-op", ("read",): "read"}[tuple(actions)]


def nivis_class(action) -> str:
    if isinstance(action, dict) and "replace" in action:
        return "replace-cbd" if action["replace"]["createBeforeDestroy"] else "replace"
    return action


class Engines:
    def __init__(self, work: Path, nivis: str):
        paths = fetch_binaries()
        self.null, self.terraform, self.nivis = paths["NIVIS_REAL_NULL"], paths["NIVIS_REAL_TERRAFORM"], nivis
        # Every object id either engine's state has held, by the address it had (see `states`).
        self.tf_ids, self.nv_ids = {}, {}
        mirror = work / "tf-mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64"
        mirror.mkdir(parents=True)
        shutil.copy2(self.null, mirror / Path(self.null).name)
        tfrc = work / "terraform.tfrc"
        tfrc.write_text(
            "provider_installation {\n  filesystem_mirror {\n"
            f"    path    = {json.dumps(str(work / 'tf-mirror'))}\n"
            '    include = ["registry.terraform.io/hashicorp/null"]\n  }\n}\n'
        )
        base = {k: v for k, v in os.environ.items() if not k.startswith("TF_") and k != "NIVIS_LOG"}
        self.tf_env = dict(base, TF_CLI_CONFIG_FILE=str(tfrc), CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1")
        self.nivis_env = dict(base, NO_COLOR="1")
        self.tf_dir, self.nv_dir = work / "terraform", work / "nivis"
        self.tf_dir.mkdir()
        self.nv_dir.mkdir()

    def write(self, config: dict, moves: list, forgets: list):
        (self.tf_dir / "main.tf.json").write_text(json.dumps(terraform_config(config), indent=1))
        (self.nv_dir / "plan.nix").write_text(nivis_plan(config, self.null, moves, forgets))

    def tf_state(self, sub: str, *addresses: str):
        r = run([self.terraform, "state", sub, *addresses], self.tf_dir, self.tf_env)
        if r.returncode != 0:
            raise RuntimeError(f"terraform state {sub} {' '.join(addresses)} failed:\n{r.stdout}{r.stderr}")

    def tf_state_edit(self, moves: list, forgets: list):
        """Terraform 1.0.3 has no `moved` (1.1) or `removed` (1.7) blocks: the harness renames
        (`terraform state mv`) and forgets (`terraform state rm`) in its state, keeping a copy to
        restore when the cycle is undone."""
        state = self.tf_dir / "terraform.tfstate"
        if state.exists():
            shutil.copy2(state, self.tf_dir / "undo.tfstate")
        for old, new in moves:
            self.tf_state("mv", f"null_resource.{tf_name(old)}", f"null_resource.{tf_name(new)}")
        for n in forgets:
            self.tf_state("rm", f"null_resource.{n}")

    def tf_state_undo(self):
        undo = self.tf_dir / "undo.tfstate"
        if undo.exists():
            shutil.copy2(undo, self.tf_dir / "terraform.tfstate")

    def tf(self, sub, *args):
        return run([self.terraform, sub, "-input=false", "-no-color", *args], self.tf_dir, self.tf_env)

    def nv(self, verb, *args):
        d = self.nv_dir
        return run([self.nivis, verb, "--file", str(d / "plan.nix"), "--state", str(d / "state.json"), *args], d, self.nivis_env)

    def tf_plan(self, target=None):
        """Planned actions per address; "cycle" when Terraform refuses with `Error: Cycle`,
        "refused" when it refuses to destroy a `prevent_destroy` resource."""
        r = self.tf("plan", "-out=tf.plan", *([f"-target=null_resource.{target}"] if target else []))
        if r.returncode != 0 and "Error: Cycle" in r.stderr:
            return "cycle"
        if r.returncode != 0 and "Instance cannot be destroyed" in r.stderr:
            return "refused"
        if r.returncode != 0:
            raise RuntimeError(f"terraform plan failed:\n{r.stdout}{r.stderr}")
        shown = run([self.terraform, "show", "-json", "tf.plan"], self.tf_dir, self.tf_env)
        doc = json.loads(shown.stdout)
        out = {}
        for c in doc.get("resource_changes", []):
            if c["mode"] != "managed":
                continue
            cls = tf_class(c["change"]["actions"])
            if cls not in ("no-op", "read"):
                out[c["address"]] = cls
        return out

    def nv_plan(self, target=None):
        """Planned actions per (Terraform) address, and the moves as (old, new) names; "refused"
        when Nivis refuses to destroy a `preventDestroy` resource."""
        r = self.nv("plan", "--json", *(["--target", f"null.null_resource.{target}"] if target else []))
        if r.returncode != 0 and "preventDestroy" in r.stdout + r.stderr:
            return "refused", []
        if r.returncode != 0:
            raise RuntimeError(f"nivis plan failed:\n{r.stdout}{r.stderr}")
        out, moves = {}, []
        for line in r.stdout.splitlines():
            e = json.loads(line)
            if e.get("type") == "planned" and not e.get("deposed"):
                out[tf_address(e["id"])] = nivis_class(e["action"])
            if e.get("type") == "deferred":
                out[tf_address(e["id"])] = "deferred"
            if e.get("type") == "moved":
                moves.append((e["from"].rsplit(".", 1)[1], e["to"].rsplit(".", 1)[1]))
        return out, moves

    def tf_recorded(self) -> set:
        """The resources in Terraform's state: `r0`... and a for_each family's `f[key]`."""
        state = self.tf_dir / "terraform.tfstate"
        if not state.exists():
            return set()
        tf = json.loads(state.read_text())
        managed = [r for r in tf["resources"] if r["mode"] == "managed"]
        keyed = {f"{r['name']}[{i['index_key']}]" for r in managed for i in r["instances"]
                 if isinstance(i.get("index_key"), str)}
        return {r["name"] for r in managed} | keyed

    def states(self):
        tf = json.loads((self.tf_dir / "terraform.tfstate").read_text())
        tf_objs = {f"null_resource.{r['name']}" + (f"[{json.dumps(i['index_key'])}]" if "index_key" in i else ""): i["attributes"]
                   for r in tf["resources"] if r["mode"] == "managed" for i in r["instances"]}
        out = run([self.nivis, "output", "--json", "--state", str(self.nv_dir / "state.json")], self.nv_dir, self.nivis_env)
        nv_objs = {tf_address(k): v for k, v in json.loads(out.stdout)["resources"].items() if k.startswith("null.null_resource.")}

        def symbolic(objs, history):
            # An id no object has any more (an untargeted resource still holds the id of one a
            # `-target` apply replaced) is named by the address that object had.
            by_id = {o["id"]: addr for addr, o in objs.items()}
            named = lambda v: by_id.get(v) or (f"gone {history[v]}" if v in history else v)
            result = {addr: {k: named(v) for k, v in (o.get("triggers") or {}).items()} for addr, o in objs.items()}
            history.update(by_id)
            return result
        return symbolic(tf_objs, self.tf_ids), symbolic(nv_objs, self.nv_ids)


def undo_cycle(e: "Engines", before: dict) -> dict:
    """Nothing of the cycle is applied: both go back to the last configuration (and state)."""
    e.tf_state_undo()
    e.write(before, [], [])
    return before


def compare_refresh_only(e: "Engines", cycle: int, differences: list):
    """A refresh-only plan of applied objects (null's never drift): both find no drift. Terraform
    1.0.3 exits 2 with `-detailed-exitcode` here although it prints "No changes." (its
    refresh-only plan counts the data source's new read as a change): its words are compared."""
    tf = e.tf("plan", "-refresh-only")
    nv = e.nv("plan", "--refresh-only", "--detailed-exitcode").returncode
    tf_drift = "No changes." not in tf.stdout
    if tf.returncode != 0 or (tf_drift, nv) != (False, 0):
        differences.append((cycle, "refresh-only", "refresh-only drift", tf.stdout[-400:], nv))
    print(f"cycle {cycle}: refresh-only plans: no drift in either", flush=True)


def pick_target(config: dict, rng: random.Random, moves: list, forgets: list):
    """A resource for `-target` / `--target` in about one cycle in eight without renames or
    forgets (those change the state outside the target)."""
    if moves or forgets or not config["res"] or rng.random() > 0.125:
        return None
    return rng.choice(sorted(config["res"]))


def run_cycle(e: "Engines", config: dict, before: dict, what: str, moves: list, forgets: list, target,
              cycle: int, differences: list, explained: list) -> dict:
    """Plan, compare, apply, compare states and second plans; returns the configuration in effect."""
    e.write(config, moves, forgets)
    e.tf_state_edit(moves, forgets)
    tf_plan, (nv_plan, nv_moves) = e.tf_plan(target), e.nv_plan(target)
    if tf_plan == "cycle":
        # Legitimate (DESIGN §57): Terraform refuses some create-before-destroy graphs.
        explained.append((cycle, what, "terraform Error: Cycle"))
        print(f"cycle {cycle}: {what}: terraform Error: Cycle (documented), edits undone", flush=True)
        return undo_cycle(e, before)
    if tf_plan == "refused" or nv_plan == "refused":
        if tf_plan != nv_plan:
            differences.append((cycle, what, "preventDestroy refusal", tf_plan, nv_plan))
            raise StopIteration
        print(f"cycle {cycle}: {what}: both refuse (preventDestroy), edits undone", flush=True)
        return undo_cycle(e, before)
    nv_forgets = sorted(a for a, act in nv_plan.items() if act == "forget")
    nv_plan = {a: act for a, act in nv_plan.items() if act != "forget"}
    if sorted(nv_moves) != sorted(moves):
        differences.append((cycle, what, "moves", moves, nv_moves))
    if nv_forgets != sorted(f"null_resource.{n}" for n in forgets):
        differences.append((cycle, what, "forgets (state rm / lib.removed)", forgets, nv_forgets))
    if tf_plan != nv_plan and empty_family_cbd(config, tf_plan, nv_plan):
        explained.append((cycle, what, "create_before_destroy of an empty count family"))
    elif tf_plan != nv_plan and data_read_deferred(config, tf_plan, nv_plan):
        explained.append((cycle, what, "data source read deferred by depends_on"))
    elif tf_plan != nv_plan and targeted_family_orphans(config, target, tf_plan, nv_plan):
        explained.append((cycle, what, "-target reaches a shrunk family's removed instances"))
    elif tf_plan != nv_plan:
        differences.append((cycle, what, "plan" + (f" -target {target}" if target else ""), tf_plan, nv_plan))
    tf_apply = e.tf("apply", "-auto-approve", "tf.plan")
    nv_apply = e.nv("apply", "--auto-approve", *(["--target", f"null.null_resource.{target}"] if target else []))
    if (tf_apply.returncode == 0) != (nv_apply.returncode == 0):
        differences.append((cycle, what, "apply", tf_apply.stdout[-400:] + tf_apply.stderr[-400:],
                            nv_apply.stdout[-400:] + nv_apply.stderr[-400:]))
        raise StopIteration
    tf_state, nv_state = e.states()
    if tf_state != nv_state:
        differences.append((cycle, what, "state", tf_state, nv_state))
    e.write(config, [], [])  # the moves and forgets are applied: their entries are dropped
    if target:
        # After a targeted apply the rest is still to do: both must plan the same rest.
        tf_rest, (nv_rest, _) = e.tf_plan(), e.nv_plan()
        if tf_rest != nv_rest:
            differences.append((cycle, what, "plan after -target", tf_rest, nv_rest))
    else:
        tf_again = e.tf("plan", "-detailed-exitcode").returncode
        nv_again = e.nv("plan", "--detailed-exitcode").returncode
        if (tf_again, nv_again) != (0, 0):
            differences.append((cycle, what, "second plan exit", tf_again, nv_again))
    print(f"cycle {cycle}: {what}{f' (-target {target})' if target else ''}: {len(tf_plan)} change(s)", flush=True)
    return config


def long_run(args, script: Path = Path(__file__)) -> int:
    """`--seeds A-B`: one run per seed, `--jobs` at a time (each run is two tools waiting on each
    other more than computing), each run's output in `--logs`; a line per seed and a total."""
    first, last = (int(x) for x in args.seeds.split("-"))
    logs = Path(args.logs or tempfile.mkdtemp(prefix="nivis-difftest-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    pending, running, failed = list(range(first, last + 1)), {}, 0
    while pending or running:
        while pending and len(running) < args.jobs:
            seed = pending.pop(0)
            log = (logs / f"seed-{seed}.log").open("w")
            argv = [sys.executable, str(script), "--cycles", str(args.cycles), "--seed", str(seed), "--nivis", args.nivis]
            running[seed] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log)
        for seed, (proc, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[seed]
            failed += proc.returncode != 0
            text = (logs / f"seed-{seed}.log").read_text()
            summary = [line for line in text.splitlines() if "cycle(s), seed" in line]
            print(summary[-1] if summary else f"seed {seed}: exit {proc.returncode}, see {logs}/seed-{seed}.log", flush=True)
        time.sleep(1)
    print(f"seeds {args.seeds} x {args.cycles} cycles: {failed} seed(s) with differences; logs in {logs}")
    return 1 if failed else 0


def arguments() -> argparse.ArgumentParser:
    """The options of both oracles (this one and difftest_lxd.py's)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", choices=["null", "lxd"], default="null",
                    help="lxd: the LXD oracle (bench/difftest_lxd.py)")
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", help="a long run: seeds A-B, one process each (see --jobs)")
    ap.add_argument("--jobs", type=int, default=2, help="with --seeds: runs at once")
    ap.add_argument("--logs", help="with --seeds: the directory for each seed's output")
    ap.add_argument("--nivis", default=str(Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release/nivis"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    return ap


def main(argv):
    args = arguments().parse_args(argv)
    if args.provider == "lxd":
        # The LXD oracle is a script of its own, which imports this one for what both share.
        lxd_oracle = REPO / "bench" / "difftest_lxd.py"
        return subprocess.run([sys.executable, str(lxd_oracle), *argv]).returncode
    if args.seeds:
        return long_run(args)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="nivis-difftest-"))
    differences, explained = [], []
    try:
        e = Engines(work, args.nivis)
        config = {"k": 0, "res": {}, "family": None, "each": None, "d_dep": None}
        e.write(config, [], [])
        r = e.tf("init")
        if r.returncode != 0:
            raise SystemExit(f"terraform init failed:\n{r.stdout}{r.stderr}")
        for cycle in range(args.cycles):
            if cycle and rng.random() < 0.1:
                compare_refresh_only(e, cycle, differences)
            before, moves, forgets = copy.deepcopy(config), [], []
            recorded = e.tf_recorded()
            what = ", ".join(edit(config, rng, moves, forgets, before, recorded) for _ in range(rng.randint(1, 3)))
            # A rename whose new name was removed in the same cycle is a plain removal of the old one.
            keys = set(config["each"]["keys"]) if config["each"] else set()
            moves = [(old, new) for old, new in moves if new in config["res"] or new.removeprefix(f"{EACH}__") in keys]
            target = pick_target(config, rng, moves, forgets)
            try:
                config = run_cycle(e, config, before, what, moves, forgets, target, cycle, differences, explained)
            except StopIteration:
                break
    finally:
        if args.keep or differences:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    for d in differences:
        print("DIFFERENCE cycle %d (%s), %s:\n  terraform: %s\n  nivis:     %s" % d)
    for cycle, what, why in explained:
        print(f"documented difference, cycle {cycle} ({what}): {why}")
    print(f"{args.cycles} cycle(s), seed {args.seed}: {len(differences)} difference(s), "
          f"{len(explained)} documented difference(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Differential test: Nivis and Terraform 1.0.3 on the same real null provider (2.1.2).

A seeded generator edits one configuration cycle after cycle (null_resource triggers, references
between resources and to a null_data_source, create_before_destroy, resources added and
removed, a count family of 0-4 instances grown and shrunk, renames); each cycle both engines
plan, apply and plan again, and this compares:

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
planned by Terraform; the generator uses plain references only.

Usage: bench/difftest.py [--cycles N] [--seed S] [--nivis PATH]. Exits 1 on any difference
not documented.
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NAMES = [f"r{i}" for i in range(5)]
FAMILY = "c"  # the count family: null_resource.c[i] in Terraform, null.null_resource.c__i in Nivis


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


def depends_on(config: dict, node: str, target: str) -> bool:
    """Whether `node` (a resource name or FAMILY) reaches `target` through references."""
    seen = set()
    while node and node not in seen:
        if node == target:
            return True
        seen.add(node)
        r = config["res"].get(node) if node != FAMILY else config["family"]
        node = r["ref"] if r else None
    return False


def drop_refs_to(config: dict, gone: str):
    for other in list(config["res"].values()) + ([config["family"]] if config["family"] else []):
        if other["ref"] == gone:
            other["ref"] = None


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
    for other in list(config["res"].values()) + ([config["family"]] if config["family"] else []):
        if other["ref"] == old:
            other["ref"] = new
    moves.append((old, new))
    return f"rename {old} -> {new}"


def edit(config: dict, rng: random.Random, moves: list, applied: set) -> str:
    """One random edit of `config`: {"res": {name: {v, ref, data, cbd}}, "k" for the data source,
    "family": {n, v, ref, cbd} or None}. A rename is appended to `moves` as (old, new); `applied`
    holds the names the state records."""
    present = [n for n in NAMES if n in config["res"]]
    # A name renamed away this cycle stays free (Nivis refuses a move whose `from` is declared).
    absent = [n for n in NAMES if n not in config["res"] and n not in {old for old, _ in moves}]
    kind = rng.choice(["value", "value", "ref", "cbd", "data", "add", "remove", "family", "family", "rename"])
    if kind == "family":
        return edit_family(config, rng)
    if kind == "rename" and present:
        return rename(config, rng, moves, applied)
    if kind == "add" and absent or not present:
        n = rng.choice(absent)
        config["res"][n] = {"v": rng.randint(0, 3), "ref": None, "data": False, "cbd": False}
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
    elif kind == "data":
        if rng.random() < 0.5:
            r["data"] = not r["data"]
        else:
            config["k"] = (config["k"] + 1) % 3
    elif kind == "remove":
        del config["res"][n]
        drop_refs_to(config, n)
    return f"{kind} {n}"


def tf_ref(name: str) -> str:
    return "${null_resource.%s.id}" % (f"{FAMILY}[0]" if name == FAMILY else name)


def terraform_config(config: dict) -> dict:
    res = {}
    for n, r in config["res"].items():
        trig = {"v": str(r["v"])}
        if r["ref"]:
            trig["ref"] = tf_ref(r["ref"])
        if r["data"]:
            trig["k"] = "${data.null_data_source.d.outputs.k}"
        body = {"triggers": trig}
        if r["cbd"]:
            body["lifecycle"] = {"create_before_destroy": True}
        res[n] = body
    fam = config["family"]
    if fam is not None:
        trig = {"v": str(fam["v"]), "i": "${count.index}"}
        if fam["ref"]:
            trig["ref"] = tf_ref(fam["ref"])
        res[FAMILY] = {"count": fam["n"], "triggers": trig}
        if fam["cbd"]:
            res[FAMILY]["lifecycle"] = {"create_before_destroy": True}
    tf = {"required_providers": {"null": {"source": "hashicorp/null", "version": "2.1.2"}}}
    doc = {"terraform": tf, "data": {"null_data_source": {"d": {"inputs": {"k": f"k{config['k']}"}}}}}
    if res:
        doc["resource"] = {"null_resource": res}
    return doc


def nv_ref(name: str) -> str:
    return f'(builtins.elemAt {FAMILY} 0).refAttr "id"' if name == FAMILY else f'{name}.refAttr "id"'


def nivis_plan(config: dict, null: str, moves: list) -> str:
    binds = [f'd = lib.mkData {{ provider = "null"; type = "null_data_source"; name = "d"; config.inputs = {{ k = "k{config["k"]}"; }}; }};']
    for n, r in config["res"].items():
        trig = [f'v = "{r["v"]}";']
        if r["ref"]:
            trig.append(f'ref = {nv_ref(r["ref"])};')
        if r["data"]:
            trig.append('k = d.ref [ "outputs" "k" ];')
        life = "lifecycle.createBeforeDestroy = true;" if r["cbd"] else ""
        binds.append(f'{n} = lib.mkResource {{ provider = "null"; type = "null_resource"; name = "{n}"; config.triggers = {{ {" ".join(trig)} }}; {life} }};')
    names = list(config["res"])
    fam = config["family"]
    if fam is not None:
        trig = [f'v = "{fam["v"]}";', "i = toString i;"]
        if fam["ref"]:
            trig.append(f'ref = {nv_ref(fam["ref"])};')
        life = "lifecycle.createBeforeDestroy = true;" if fam["cbd"] else ""
        binds.append(f'{FAMILY} = lib.count {fam["n"]} (i: lib.mkResource {{ provider = "null"; type = "null_resource"; name = "{FAMILY}"; config.triggers = {{ {" ".join(trig)} }}; {life} }});')
        names.append(FAMILY)
    moved = " ".join(f'(lib.moved {{ from = "null.null_resource.{old}"; to = "null.null_resource.{new}"; }})' for old, new in moves)
    return (
        f"let lib = import {REPO}/nix; in ledger: let {' '.join(binds)} in lib.toIR {{ "
        f'providers.null = lib.mkProvider {{ source = "{null}"; }}; '
        f"resources = [ {' '.join(names)} ]; data = [ d ]; moved = [ {moved} ]; inherit ledger; }}\n"
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


def tf_address(nivis_id: str) -> str:
    """null.null_resource.c__2 (an instance of lib.count) -> null_resource.c[2], Terraform's address."""
    return re.sub(r"__(\d+)$", r"[\1]", nivis_id.removeprefix("null."))


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

    def write(self, config: dict, moves: list):
        (self.tf_dir / "main.tf.json").write_text(json.dumps(terraform_config(config), indent=1))
        (self.nv_dir / "plan.nix").write_text(nivis_plan(config, self.null, moves))

    def tf_state_mv(self, moves: list):
        """Terraform 1.0.3 has no `moved` blocks (1.1 added them): the harness renames its state."""
        for old, new in moves:
            r = run([self.terraform, "state", "mv", f"null_resource.{old}", f"null_resource.{new}"], self.tf_dir, self.tf_env)
            if r.returncode != 0:
                raise RuntimeError(f"terraform state mv {old} {new} failed:\n{r.stdout}{r.stderr}")

    def tf(self, sub, *args):
        return run([self.terraform, sub, "-input=false", "-no-color", *args], self.tf_dir, self.tf_env)

    def nv(self, verb, *args):
        d = self.nv_dir
        return run([self.nivis, verb, "--file", str(d / "plan.nix"), "--state", str(d / "state.json"), *args], d, self.nivis_env)

    def tf_plan(self):
        """Planned actions per address, or None when Terraform refuses with `Error: Cycle`."""
        r = self.tf("plan", "-out=tf.plan")
        if r.returncode != 0 and "Error: Cycle" in r.stderr:
            return None
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

    def nv_plan(self):
        """Planned actions per (Terraform) address, and the moves as (old, new) names."""
        r = self.nv("plan", "--json")
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

    def states(self):
        tf = json.loads((self.tf_dir / "terraform.tfstate").read_text())
        tf_objs = {f"null_resource.{r['name']}" + (f"[{i['index_key']}]" if "index_key" in i else ""): i["attributes"]
                   for r in tf["resources"] if r["mode"] == "managed" for i in r["instances"]}
        out = run([self.nivis, "output", "--json", "--state", str(self.nv_dir / "state.json")], self.nv_dir, self.nivis_env)
        nv_objs = {tf_address(k): v for k, v in json.loads(out.stdout)["resources"].items() if k.startswith("null.null_resource.")}

        def symbolic(objs):
            by_id = {o["id"]: addr for addr, o in objs.items()}
            return {addr: {k: by_id.get(v, v) for k, v in (o.get("triggers") or {}).items()} for addr, o in objs.items()}
        return symbolic(tf_objs), symbolic(nv_objs)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nivis", default=str(REPO / "target/release/nivis"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="nivis-difftest-"))
    differences, explained = [], []
    try:
        e = Engines(work, args.nivis)
        config = {"k": 0, "res": {}, "family": None}
        e.write(config, [])
        r = e.tf("init")
        if r.returncode != 0:
            raise SystemExit(f"terraform init failed:\n{r.stdout}{r.stderr}")
        for cycle in range(args.cycles):
            before, moves = copy.deepcopy(config), []
            what = ", ".join(edit(config, rng, moves, set(before["res"])) for _ in range(rng.randint(1, 3)))
            # A renamed resource removed in the same cycle is a plain removal of the old name.
            moves = [(old, new) for old, new in moves if new in config["res"]]
            e.write(config, moves)
            e.tf_state_mv(moves)
            tf_plan, (nv_plan, nv_moves) = e.tf_plan(), e.nv_plan()
            if tf_plan is None:
                # Legitimate (DESIGN §57): Terraform refuses some create-before-destroy graphs.
                # Nothing is applied; both go back to the last configuration (and names).
                explained.append((cycle, what, "terraform Error: Cycle"))
                e.tf_state_mv([(new, old) for old, new in reversed(moves)])
                config = before
                e.write(config, [])
                print(f"cycle {cycle}: {what}: terraform Error: Cycle (documented), edits undone", flush=True)
                continue
            if sorted(nv_moves) != sorted(moves):
                differences.append((cycle, what, "moves", moves, nv_moves))
            if tf_plan != nv_plan and empty_family_cbd(config, tf_plan, nv_plan):
                explained.append((cycle, what, "create_before_destroy of an empty count family"))
            elif tf_plan != nv_plan:
                differences.append((cycle, what, "plan", tf_plan, nv_plan))
            tf_apply = e.tf("apply", "-auto-approve", "tf.plan")
            nv_apply = e.nv("apply", "--auto-approve")
            if (tf_apply.returncode == 0) != (nv_apply.returncode == 0):
                differences.append((cycle, what, "apply", tf_apply.stdout[-400:] + tf_apply.stderr[-400:],
                                    nv_apply.stdout[-400:] + nv_apply.stderr[-400:]))
                break
            tf_state, nv_state = e.states()
            if tf_state != nv_state:
                differences.append((cycle, what, "state", tf_state, nv_state))
            tf_again = e.tf("plan", "-detailed-exitcode").returncode
            nv_again = e.nv("plan", "--detailed-exitcode").returncode
            if (tf_again, nv_again) != (0, 0):
                differences.append((cycle, what, "second plan exit", tf_again, nv_again))
            e.write(config, [])  # the move is applied: its entry is dropped (it would be a no-op)
            print(f"cycle {cycle}: {what}: {len(tf_plan)} change(s)", flush=True)
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

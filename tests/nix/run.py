#!/usr/bin/env python3
"""Tests of the Nivis Nix library (nix/) and flake, driven through `nix eval`.

Sections:
  unit      tests/nix/unit.nix: expression == expected, all in one evaluation
  throws    tests/nix/throws.nix: each expression must fail with the expected message
  phases    the flake's nivis.plan / nivis.cycle evaluated exactly as the CLI does,
            with the ledgers of phases 0..3, compared with tests/nix/two-providers/
  property  tests/nix/property.nix: random graphs, every IR validated by check.py
            plus resolution properties against the ledger that produced it
  timing    the two-provider plan and a 1000-resource plan evaluate in under 1 s
  allocations  a plan of independent resources allocates at most so many Nix values,
            environments and attribute sets per resource, and its evaluator's heap stays
            within a bound (NIX_SHOW_STATS: counts and sizes, not times; issue 35)

Usage: run.py [SECTION...]   (default: all). Prints "N passed, M failed" last.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CHECK = ROOT / "tests" / "ir-conformance" / "check.py"
sys.dont_write_bytecode = True  # keep tests/ir-conformance free of __pycache__
sys.path.insert(0, str(CHECK.parent))
import check  # noqa: E402  (render_path, shared with the conformance checker)

NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]
LIB = f"(import {ROOT}/nix)"
PROPERTY_GRAPHS = 300
TIME_LIMIT = 1.0


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def record(self, ok, name, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}")
            for line in str(detail).splitlines()[:40]:
                print(f"    {line}")


def nix_eval(args):
    proc = subprocess.run(NIX + ["eval", "--impure"] + args, capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def nix_json(args):
    rc, out, err = nix_eval(["--json"] + args)
    if rc != 0:
        raise RuntimeError(f"nix eval {' '.join(args)} failed:\n{err}")
    return json.loads(out)


def validate(files):
    """check.py validate on many files at once -> {file: [error lines]}."""
    files = [str(f) for f in files]
    proc = subprocess.run([sys.executable, str(CHECK), "validate"] + files, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"check.py failed to run:\n{proc.stderr}")
    result = {f: [] for f in files}
    if len(files) == 1:
        lines = proc.stdout.splitlines()
        result[files[0]] = [] if lines == ["ok"] else lines
        return result
    for line in proc.stdout.splitlines():
        name, _, message = line.partition(": ")
        if message != "ok":
            result[name].append(message)
    return result


# --- sections -------------------------------------------------------------------

def section_unit(results):
    expr = (f"let tests = import {HERE}/unit.nix {{ lib = {LIB}; }}; in map (t: "
            "let r = builtins.tryEval (builtins.deepSeq t.expr t.expr); in "
            "{ inherit (t) name; ok = r.success && r.value == t.expected; "
            "got = if r.success then r.value else \"<evaluation failed>\"; expected = t.expected; }) tests")
    for test in nix_json(["--expr", expr]):
        results.record(test["ok"], f"unit: {test['name']}",
                       f"expected: {json.dumps(test['expected'])}\ngot:      {json.dumps(test['got'])}")


def section_throws(results):
    cases = nix_json(["--expr", f"builtins.mapAttrs (n: t: t.expect) (import {HERE}/throws.nix {{ lib = {LIB}; }})"])

    def run(name):
        return nix_eval(["--json", "--expr", f"(import {HERE}/throws.nix {{ lib = {LIB}; }}).{name}.expr"])

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = dict(zip(cases, pool.map(run, cases)))
    for name, expect in cases.items():
        rc, out, err = outcomes[name]
        if rc == 0:
            results.record(False, f"throws: {name}", f"evaluated without error:\n{out[:400]}")
        else:
            results.record(expect in err, f"throws: {name}", f"expected in stderr: {expect}\nstderr:\n{err}")


def section_phases(results, tmp):
    # Evaluate the flake the way the CLI does (builtins.getFlake, see src/nixeval.rs). A copy
    # keeps the check independent of what git tracks in the working tree; its flake.lock lets
    # it evaluate offline (nixpkgs is locked there and never fetched for these attributes).
    flake = tmp / "flake"
    flake.mkdir()
    shutil.copy(ROOT / "flake.nix", flake / "flake.nix")
    shutil.copy(ROOT / "flake.lock", flake / "flake.lock")
    shutil.copytree(ROOT / "nix", flake / "nix")
    golden = HERE / "two-providers"
    get_flake = f'(builtins.getFlake "path:{flake}")'

    def plan(attr, ledger):
        return nix_json(["--expr", f"{get_flake}.nivis.{attr}", "--apply",
                         f"plan: plan (builtins.fromJSON (builtins.readFile {ledger}))"])

    api = nix_json(["--expr", f"{get_flake}.lib", "--apply", "builtins.attrNames"])
    want = ["byKey", "check", "checks", "compute", "count", "drv", "forEach", "mkData", "mkEphemeral",
            "mkProvider", "mkResource", "modules", "moved", "policy", "remoteState", "removed", "schemaVersion", "str",
            "toIR", "typecheck", "vars"]
    results.record(api == want, "phases: flake lib exposes the documented API", f"got {api}")

    cases = [("plan", f"ledger-phase{i}.json", f"ir-phase{i}.json") for i in range(4)]
    cases.append(("cycle", "ledger-phase0.json", "ir-cycle-phase0.json"))
    irs = {}
    for attr, ledger, expected_file in cases:
        got = plan(attr, golden / ledger)
        expected = json.loads((golden / expected_file).read_text())
        irs[(attr, ledger)] = got
        out = tmp / f"{attr}-{ledger}"
        out.write_text(json.dumps(got))
        errors = validate([out])[str(out)]
        diff = "" if got == expected else f"differs from {expected_file}:\n{json.dumps(got, indent=1, sort_keys=True)}"
        results.record(got == expected and not errors, f"phases: nivis.{attr} with {ledger}", diff + "\n".join(errors))

    # The progression the executor relies on, spelled out.
    def config(ir, i):
        return ir["resources"][i]["config"]

    def consumer(ir):
        return ir["nixConsumers"][0]["value"]

    p = [irs[("plan", f"ledger-phase{i}.json")] for i in range(4)]
    checks = [
        ("phase 0: A known, B.from and C.label derived, consumer pending",
         config(p[0], 0) == {} and "__derived" in config(p[0], 1)["from"] and "__derived" in config(p[0], 2)["label"]
         and "__ref" in consumer(p[0])["tokenValue"]),
        ("phase 1: B.from resolves to rec-alpha::0, C still derived",
         config(p[1], 1)["from"] == "rec-alpha::0" and "__derived" in config(p[1], 2)["label"]
         and consumer(p[1])["tokenValue"] == "alpha::0" and "__derived" in consumer(p[1])["combined"]),
        ("phase 2: C.label and systemConfig fully concrete",
         config(p[2], 2)["label"] == "beta://rec-alpha::0::alpha::0"
         and consumer(p[2]) == {"recordEndpoint": "beta://rec-alpha::0", "tokenValue": "alpha::0",
                                "combined": "beta://rec-alpha::0::alpha::0"}),
        ("phase 3: nothing new resolves (fixpoint)", p[3] == p[2]),
        ("edges survive resolution in every phase", all(ir["edges"] == p[0]["edges"] for ir in p)),
    ]
    for name, ok in checks:
        results.record(ok, f"phases: {name}")


def find_markers(tree, out):
    if isinstance(tree, list):
        for item in tree:
            find_markers(item, out)
    elif isinstance(tree, dict):
        if "__sensitive" in tree:
            out.append(("__sensitive", tree["__sensitive"]))
            find_markers(tree["__sensitive"]["value"], out)
            return
        for marker in ("__ref", "__sensitiveRef", "__derived", "__build"):
            if marker in tree:
                out.append((marker, tree[marker]))
                return
        for value in tree.values():
            find_markers(value, out)


def secrets_outside_sensitive(tree, path="", inside=False):
    """Paths of strings holding a channel secret (SECRET-...) that are not inside a
    __sensitive value."""
    if isinstance(tree, list):
        return [p for i, item in enumerate(tree) for p in secrets_outside_sensitive(item, f"{path}[{i}]", inside)]
    if isinstance(tree, dict):
        if "__sensitive" in tree:
            return secrets_outside_sensitive(tree["__sensitive"]["value"], path, True)
        return [p for k, v in tree.items() for p in secrets_outside_sensitive(v, f"{path}.{k}", inside)]
    if isinstance(tree, str) and "SECRET-" in tree and not inside:
        return [path or "."]
    return []


def ir_markers(ir):
    out = []
    for node in ir["resources"] + ir["data"]:
        find_markers(node["config"], out)
    for consumer in ir["nixConsumers"]:
        find_markers(consumer["value"], out)
    for provider in ir["providers"].values():
        find_markers(provider["config"], out)
    return out


def resolution_problems(ir, applied):
    """What must hold for an IR evaluated against a ledger holding `applied` nodes."""
    problems = [f"a secret outside __sensitive at {p}" for p in secrets_outside_sensitive(ir)]
    for marker, body in ir_markers(ir):
        if marker == "__ref" and body["resource"] in applied:
            problems.append(f"__ref to applied node {body['resource']} {body['path']}")
        if marker == "__sensitiveRef" and (body["resource"] not in applied or body["path"][0] != "secret"):
            problems.append(f"__sensitiveRef {body} without a sensitive ledger entry")
        if marker == "__derived":
            targets = {i.rsplit(".", 1)[0] for i in body["inputs"]}
            if targets <= applied:
                problems.append(f"__derived whose inputs are all applied: {body['inputs']}")
    return problems


def derived_paths(tree, path, out):
    """Rendered config paths of the __derived leaves in a tree."""
    if isinstance(tree, list):
        for i, item in enumerate(tree):
            derived_paths(item, path + [i], out)
    elif isinstance(tree, dict):
        if "__derived" in tree:
            out.append(check.render_path(path))
        elif not any(m in tree for m in ("__ref", "__sensitiveRef", "__build")):
            for key, value in tree.items():
                derived_paths(value, path + [key], out)
    return out


def edge_growth_problems(partial, full):
    """Resolving more outputs never drops an edge. It may add some, only below a value
    that was __derived: references inside a computed value are seen once it is computed."""
    problems = []
    before = {(e["from"], e["to"], e["via"]) for e in partial["edges"]}
    after = {(e["from"], e["to"], e["via"]) for e in full["edges"]}
    for edge in sorted(before - after):
        problems.append(f"edge {edge} disappeared once more outputs were known")
    pending = {}
    for node in partial["resources"] + partial["data"]:
        pending[node["id"]] = derived_paths(node["config"], [], [])
    for frm, to, via in sorted(after - before):
        below = any(via == p or via.startswith(p + ".") or via.startswith(p + "[") for p in pending.get(to, []))
        if not below:
            problems.append(f"edge {(frm, to, via)} appeared although {via} was not derived before")
    return problems


def section_property(results, tmp):
    started = time.perf_counter()
    graphs = nix_json(["--expr", f"import {HERE}/property.nix {{ lib = {LIB}; graphs = {PROPERTY_GRAPHS}; }}"])
    evaluated = time.perf_counter() - started
    folder = tmp / "property"
    folder.mkdir()
    files = {}
    for g in graphs:
        for variant in ("partial", "full"):
            path = folder / f"{g['name']}-{variant}.json"
            path.write_text(json.dumps(g[variant]))
            files[(g["name"], variant)] = str(path)
    verdicts = validate(files.values())
    nodes = 0
    for g in graphs:
        problems = []
        for variant in ("partial", "full"):
            problems += [f"{variant}: {e}" for e in verdicts[files[(g["name"], variant)]]]
        ids = [n["id"] for n in g["full"]["resources"] + g["full"]["data"]]
        if sorted(ids) != sorted(g["nodeIds"]):
            problems.append(f"node ids {ids} != generated {g['nodeIds']}")
        problems += [f"partial: {p}" for p in resolution_problems(g["partial"], set(g["partialLedger"]["outputs"]))]
        problems += [f"full: {p}" for p in resolution_problems(g["full"], set(g["nodeIds"]))]
        problems += edge_growth_problems(g["partial"], g["full"])
        nodes += len(ids)
        results.record(not problems, f"property: {g['name']} ({len(ids)} nodes)",
                       "\n".join(problems) + f"\nIR files: {files[(g['name'], 'partial')]} (kept only on failure)")
    print(f"property: {len(graphs)} graphs, {nodes} nodes, evaluated in {evaluated:.2f} s")


def timed_eval(args):
    best = None
    for _ in range(3):
        started = time.perf_counter()
        rc, out, err = nix_eval(["--json"] + args)
        elapsed = time.perf_counter() - started
        if rc != 0:
            raise RuntimeError(err)
        best = elapsed if best is None else min(best, elapsed)
    return best, json.loads(out)


def section_timing(results):
    ledger = HERE / "two-providers" / "ledger-phase2.json"
    t, _ = timed_eval(["--expr", f"import {ROOT}/nix/examples/two-providers.nix {{ lib = {LIB}; }} "
                                 f"(builtins.fromJSON (builtins.readFile {ledger}))"])
    results.record(t < TIME_LIMIT, f"timing: two-provider plan evaluates in {t * 1000:.0f} ms (limit {TIME_LIMIT} s)")
    t, ir = timed_eval(["--expr", f"import {HERE}/bench.nix {{ lib = {LIB}; n = 1000; }} null"])
    ok = t < TIME_LIMIT and len(ir["resources"]) == 1000
    results.record(ok, f"timing: 1000-resource plan evaluates in {t * 1000:.0f} ms (limit {TIME_LIMIT} s)")


# What one resource of a plain plan may allocate (measured with Nix 2.8: 59.0 values, 37
# environments and 7 sets since DESIGN §98 took the binding of toIR's per-node walk entry and
# the importId thunk off nodes without them; 62.2, 39 and 7 when module instances, conditions
# and the constructor's call site (DESIGN §91, §95) joined every node; 55, 35 and 7 since
# DESIGN §86; 96, 56 and 12 before it; 155, 76 and 24 before issue 35). A 100k-resource plan's
# evaluator grows with these counts.
ALLOCATION_RESOURCES = 2000
MAX_VALUES_PER_RESOURCE = 60
MAX_ENVS_PER_RESOURCE = 38
MAX_SETS_PER_RESOURCE = 8
# The evaluator's garbage-collected heap at the end of a 20000-resource plan, started as
# Nivis starts it (GC_INITIAL_HEAP_SIZE=8M): what is alive at once, not what is allocated
# (the same for the same Nix and plan; measured 57.3 MB since DESIGN §98 (one attribute more in
# `lib` alone moved it to 65.3 MB before the per-node savings: the heap grows in 8 MB steps),
# 49.3 MB at DESIGN §86, 73.3 MB before,
# when every caller's node lived until all instances were made). RSS follows the heap.
HEAP_RESOURCES = 20000
MAX_HEAP_MB = 64


def plain_plan_stats(n):
    """NIX_SHOW_STATS and the IR of a plan of n independent resources made by lib.count."""
    plan = (f"let lib = {LIB}; in lib.toIR {{ providers.null = lib.mkProvider {{ source = \"null\"; }}; "
            f"resources = lib.count {n} (i: lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; "
            f"name = \"r\"; config.triggers = {{ i = toString i; }}; }}); ledger = {{ }}; }}")
    proc = subprocess.run(NIX + ["eval", "--json", "--impure", "--expr", plan], capture_output=True, text=True,
                          env={**os.environ, "NIX_SHOW_STATS": "1", "GC_INITIAL_HEAP_SIZE": "8M"})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stderr[proc.stderr.index("{"):proc.stderr.rindex("}") + 1]), json.loads(proc.stdout)


def section_allocations(results):
    n = ALLOCATION_RESOURCES
    stats, ir = plain_plan_stats(n)
    values = stats["values"]["number"] / n
    envs = stats["envs"]["number"] / n
    sets = stats["sets"]["number"] / n
    ok = len(ir["resources"]) == n
    results.record(ok and values <= MAX_VALUES_PER_RESOURCE,
                   f"allocations: {values:.1f} values per resource (limit {MAX_VALUES_PER_RESOURCE})")
    results.record(ok and envs <= MAX_ENVS_PER_RESOURCE,
                   f"allocations: {envs:.1f} environments per resource (limit {MAX_ENVS_PER_RESOURCE})")
    results.record(ok and sets <= MAX_SETS_PER_RESOURCE,
                   f"allocations: {sets:.1f} attribute sets per resource (limit {MAX_SETS_PER_RESOURCE})")
    stats, ir = plain_plan_stats(HEAP_RESOURCES)
    heap = stats["gc"]["heapSize"] / 2**20
    results.record(len(ir["resources"]) == HEAP_RESOURCES and heap <= MAX_HEAP_MB,
                   f"allocations: {heap:.1f} MB of heap at {HEAP_RESOURCES} resources (limit {MAX_HEAP_MB} MB)")


SECTIONS = {
    "unit": lambda r, tmp: section_unit(r),
    "throws": lambda r, tmp: section_throws(r),
    "phases": section_phases,
    "property": section_property,
    "timing": lambda r, tmp: section_timing(r),
    "allocations": lambda r, tmp: section_allocations(r),
}


def main(argv):
    chosen = argv[1:] or list(SECTIONS)
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        print(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}", file=sys.stderr)
        return 2
    if shutil.which("nix") is None:
        print("nix is not on PATH: these tests need it", file=sys.stderr)
        return 2
    results = Results()
    tmp = Path(tempfile.mkdtemp(prefix="nivis-nix-tests-"))
    try:
        for name in chosen:
            try:
                SECTIONS[name](results, tmp)
            except Exception as e:  # a section that cannot run is a failure, not a skip
                results.record(False, f"{name}: section crashed", repr(e))
    finally:
        if results.failed == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept test files in {tmp}")
    print(f"{results.passed} passed, {results.failed} failed")
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Tests of the constructors `nivis gen` writes, evaluated with real Nix.

run.sh generates the providers (alpha, kinds and, unless --quick, the large synthetic one)
into GEN and calls:  run.py GEN [SECTION...]

Sections:
  valid    tests/nix/gen/valid.nix: every plan passes check.py validate, every check is true
  throws   tests/nix/gen/throws.nix: each misuse fails with its message
  warns    tests/nix/gen/warns.nix: deprecated types and arguments evaluate with a warning
  lazy     one constructor evaluates although every other generated file is broken
  timing   one constructor from the large provider (1500 types) through lib.toIR
  real     tests/nix/gen/real.nix, for the providers generated from real schemas found in
           $NIVIS_GEN_REAL (null, workato, aws), and one-constructor timings from them

Prints "N passed, M failed" last; exits 1 on any failure.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CHECK = ROOT / "tests" / "ir-conformance" / "check.py"

# The result tally and the nix runner are shared with the library tests (tests/nix/run.py).
sys.path.insert(0, str(HERE.parent))
from run import NIX, Results, nix_eval  # noqa: E402
EVAL_LIMIT = 0.2  # seconds for one constructor of the large provider, nix startup included


def nix_json(expr):
    rc, out, err = nix_eval(["--json", "--expr", expr])
    if rc != 0:
        raise RuntimeError(f"nix eval failed:\n{err}")
    return json.loads(out)


def cases(file, gen):
    return f"(import {HERE}/{file} {{ root = {ROOT}; gen = {gen}; }})"


# A resource is forced through its id and config (printing it as JSON would call its
# __toString, which throws on purpose).
FORCE = ('(x: builtins.deepSeq (if builtins.isAttrs x && (x._type or null) == "nivis:resource" '
         'then { inherit (x) id config; } else x) true)')


def section_valid(results, gen, tmp):
    got = nix_json(f"builtins.mapAttrs (n: c: {{ inherit (c) ir; checks = c.checks or {{ }}; }}) {cases('valid.nix', gen)}")
    files = {}
    for name, case in got.items():
        path = tmp / f"valid-{name}.json"
        path.write_text(json.dumps(case["ir"]))
        files[name] = path
    proc = subprocess.run([sys.executable, str(CHECK), "validate"] + [str(p) for p in files.values()],
                          capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    for name, case in got.items():
        errors = [l for l in lines if l.startswith(f"{files[name]}: ") and not l.endswith(": ok")]
        if len(files) == 1 and lines != ["ok"]:
            errors = lines
        failed = [k for k, v in case["checks"].items() if v is not True]
        results.record(not errors and not failed, f"valid: {name}",
                       "\n".join(errors + [f"check {k} is false" for k in failed]
                                 + [json.dumps(case["ir"])[:600]]))


def section_expect(results, gen, file, succeed):
    names = nix_json(f"builtins.mapAttrs (n: c: c.expect) {cases(file, gen)}")

    def run(name):
        return nix_eval(["--json", "--expr", f"{FORCE} {cases(file, gen)}.{name}.expr"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = dict(zip(names, pool.map(run, names)))
    section = file.removesuffix(".nix")
    for name, expect in names.items():
        rc, out, err = outcomes[name]
        if succeed:
            results.record(rc == 0 and expect in err, f"{section}: {name}",
                           f"exit {rc}; expected in stderr: {expect}\nstderr:\n{err}")
        elif rc == 0:
            results.record(False, f"{section}: {name}", f"evaluated without error:\n{out[:400]}")
        else:
            results.record(expect in err, f"{section}: {name}", f"expected in stderr: {expect}\nstderr:\n{err}")


def section_lazy(results, gen, tmp):
    # Break every file but the one constructor used (and the index): evaluating it must
    # not read the others.
    copy = tmp / "lazy"
    shutil.copytree(gen / "alpha", copy / "alpha")
    for f in [copy / "alpha" / "provider.nix", copy / "alpha" / "data" / "alpha_lookup.nix"]:
        f.write_text("throw \"this file must not be read\" (\n")
    lib = f"(import {HERE}/lib.nix {{ root = {ROOT}; gen = {gen}; }}).lib"
    expr = (f"let lib = {lib}; p = import {copy}/alpha lib; in lib.toIR {{ "
            "providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; "
            "resources = [ (p.resources.alpha_token { name = \"A\"; config.label = \"x\"; }) ]; }")
    rc, out, err = nix_eval(["--json", "--expr", expr])
    results.record(rc == 0, "lazy: one constructor reads only its own file and the index", err)


# large_resource_0777 (see `large` in src/codegen/tests.rs): attribute_NN has type number NN % 7 of
# its list (string, number, bool, list(string), map(string), set(number), object) and is
# required for NN = 0 and NN % 5 == 4, computed for NN % 5 == 0, optional otherwise. The
# `disk` list block (1 to 8) needs disk_1 (number), its `options` block inner_1 (number);
# `rules` objects need field_1 (number), `network` blocks net_1 (number).
LARGE_CONFIG = ('{ attribute_00 = "x"; attribute_02 = true; attribute_03 = [ "a" "b" ]; '
                'attribute_04 = { k = "v"; }; attribute_07 = "s"; attribute_09 = false; '
                'attribute_13 = { a = "a"; b = 1; }; attribute_14 = "s"; attribute_19 = [ 1 2 ]; '
                'attribute_24 = [ "x" ]; attribute_29 = 3; '
                'rules = [ { field_1 = 1; field_0 = "f"; } ]; '
                'disk = [ { disk_1 = 10; options = { inner_1 = 2; }; } { disk_1 = 20; } ]; '
                'network = [ { net_1 = 1; } ]; }')


def timed(expr, runs=7):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        rc, out, err = nix_eval(["--json", "--expr", expr])
        times.append(time.perf_counter() - start)
        if rc != 0:
            raise RuntimeError(err)
    return min(times), statistics.median(times), out


def section_timing(results, gen, tmp):
    large = gen / "large"
    if not large.exists():
        print("SKIP timing: the large provider was not generated")
        return
    lib = f"(import {HERE}/lib.nix {{ root = {ROOT}; gen = {gen}; }}).lib"
    providers = "providers.large = lib.mkProvider { source = \"provider-large\"; };"
    via_gen = (f"let lib = {lib}; p = import {large} lib; in lib.toIR {{ {providers} "
               f"resources = [ (p.resources.large_resource_0777 {{ name = \"r\"; config = {LARGE_CONFIG}; }}) ]; }}")
    plain = (f"let lib = {lib}; in lib.toIR {{ {providers} resources = [ (lib.mkResource "
             f"{{ provider = \"large\"; type = \"large_resource_0777\"; name = \"r\"; config = {LARGE_CONFIG}; }}) ]; }}")
    startup = timed("1")
    base = timed(plain)
    gen_t = timed(via_gen)
    ir = tmp / "large.json"
    ir.write_text(gen_t[2])
    proc = subprocess.run([sys.executable, str(CHECK), "validate", str(ir)], capture_output=True, text=True)
    results.record(proc.stdout.strip() == "ok", "timing: the large constructor's IR validates", proc.stdout)
    print(f"  nix eval startup (expr 1):        min {startup[0]*1000:6.1f} ms, median {startup[1]*1000:6.1f} ms")
    print(f"  toIR with lib.mkResource:         min {base[0]*1000:6.1f} ms, median {base[1]*1000:6.1f} ms")
    print(f"  toIR with the generated one:      min {gen_t[0]*1000:6.1f} ms, median {gen_t[1]*1000:6.1f} ms")
    results.record(gen_t[0] < EVAL_LIMIT, f"timing: one constructor of 1500 evaluates in under {EVAL_LIMIT * 1000:.0f} ms",
                   f"took {gen_t[0]*1000:.1f} ms")


def section_real(results, gen, tmp):
    real = os.environ.get("NIVIS_GEN_REAL")
    if not real:
        print("SKIP real: NIVIS_GEN_REAL is not set")
        return
    real = Path(real).resolve()
    src = f"(import {HERE}/real.nix {{ root = {ROOT}; gen = {gen}; real = {real}; }})"
    found = [p for p in ["null", "workato", "aws"] if (real / p / "default.nix").exists()]
    for provider in found:
        names = nix_json(f"builtins.mapAttrs (n: c: c.expect or null) {src}.{provider}")
        for name, expect in names.items():
            expr = f"{src}.{provider}.{name}.expr"
            if expect is None:
                rc, out, err = nix_eval(["--json", "--expr", expr])
                errors = [err] if rc != 0 else []
                if rc == 0:
                    ir = tmp / f"real-{provider}-{name}.json"
                    ir.write_text(out)
                    proc = subprocess.run([sys.executable, str(CHECK), "validate", str(ir)],
                                          capture_output=True, text=True)
                    errors = [] if proc.stdout.strip() == "ok" else [proc.stdout]
                results.record(not errors, f"real: {provider}: {name}", "\n".join(errors))
            else:
                rc, out, err = nix_eval(["--json", "--expr", f"{FORCE} ({expr})"])
                results.record(rc != 0 and expect in err, f"real: {provider}: {name}",
                               f"exit {rc}; expected in stderr: {expect}\nstderr:\n{err}")
        if "valid" in names:
            best, median, _ = timed(f"{src}.{provider}.valid.expr")
            print(f"  {provider}: the valid plan evaluates in min {best*1000:.1f} ms, median {median*1000:.1f} ms")
            results.record(best < EVAL_LIMIT, f"real: {provider}: valid plan under {EVAL_LIMIT * 1000:.0f} ms",
                           f"took {best*1000:.1f} ms")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    gen = Path(sys.argv[1]).resolve()
    wanted = sys.argv[2:] or ["valid", "throws", "warns", "lazy", "timing", "real"]
    results = Results()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for section in wanted:
            if section == "valid":
                section_valid(results, gen, tmp)
            elif section == "throws":
                section_expect(results, gen, "throws.nix", succeed=False)
            elif section == "warns":
                section_expect(results, gen, "warns.nix", succeed=True)
            elif section == "lazy":
                section_lazy(results, gen, tmp)
            elif section == "timing":
                section_timing(results, gen, tmp)
            elif section == "real":
                section_real(results, gen, tmp)
            else:
                sys.exit(f"unknown section {section}")
    print(f"{results.passed} passed, {results.failed} failed")
    sys.exit(1 if results.failed else 0)


if __name__ == "__main__":
    main()

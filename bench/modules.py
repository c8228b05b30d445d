#!/usr/bin/env python3
"""The cost of writing a project as modules (lib.modules) instead of one plain list.

Generates, in a temporary directory, the same N null_resources (default 10000) twice:
  plain.nix    one lib.toIR call over a genList of resources
  modules.nix  lib.modules.toIR over M module files (default 100), each declaring typed options
               (enable, label, count) and defining its share of the resources under mkIf,
               plus one module setting every label (so each option merges two definitions)
and times `nix eval --json` of each plan's IR (the evaluation `nivis plan` runs), median of
--reps runs. Prints a Markdown table for docs/benchmarks.md.

Usage: bench/modules.py [--resources N] [--modules M] [--reps R]
"""
import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]
PROVIDERS = 'providers.null = lib.mkProvider { source = "hashicorp/null"; };'


def resource(name: str, label: str) -> str:
    return (f'lib.mkResource {{ provider = "null"; type = "null_resource"; name = {name}; '
            f'config.triggers = {{ label = {label}; tier = "web"; }}; }}')


def write(dir: Path, n: int, m: int) -> None:
    lib = f"let lib = import {ROOT}/nix; in\n"
    per = n // m
    one = resource('"r${toString k}_${toString i}"', '"label-${toString k}"')
    plain = (lib + "ledger: lib.toIR { " + PROVIDERS + " resources = builtins.concatLists (builtins.genList (k: "
             f"builtins.genList (i: {one}) {per}) {m}); inherit ledger; }}\n")
    (dir / "plain.nix").write_text(plain)
    for k in range(m):
        theirs = resource(f'"r{k}_${{toString i}}"', "c.label")
        (dir / f"svc{k}.nix").write_text(f"""{{ lib, config, ... }}:
let m = lib.modules; t = m.types; c = config.svc{k}; in
{{
  options.svc{k} = {{
    enable = m.mkOption {{ type = t.bool; default = true; }};
    label = m.mkOption {{ type = t.str; default = "unset"; }};
    count = m.mkOption {{ type = t.int; default = {per}; }};
  }};
  config = m.mkIf c.enable {{
    nivis.resources = builtins.genList (i: {theirs}) c.count;
  }};
}}
""")
    labels = " ".join(f'svc{k}.label = "label-{k}";' for k in range(m))
    imports = " ".join(f"./svc{k}.nix" for k in range(m))
    (dir / "top.nix").write_text(f"{{ lib, ... }}: {{ imports = [ {imports} ]; nivis.providers.null = lib.mkProvider {{ source = \"hashicorp/null\"; }}; {labels} }}\n")
    (dir / "modules.nix").write_text(lib + "ledger: lib.modules.toIR { modules = [ ./top.nix ]; inherit ledger; }\n")


def evaluate(plan: Path) -> float:
    started = time.monotonic()
    out = subprocess.run(NIX + ["eval", "--json", "--impure", "--file", str(plan), "--apply",
                                'p: p { phase = 0; outputs = { }; vars = { }; }'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    took = time.monotonic() - started
    assert len(out.stdout) > 1000, out.stderr
    return took, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resources", type=int, default=10000)
    ap.add_argument("--modules", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        dir = Path(d)
        write(dir, a.resources, a.modules)
        times = {"plain": [], "modules": []}
        irs = {}
        for _ in range(a.reps):
            for kind in times:
                took, ir = evaluate(dir / f"{kind}.nix")
                times[kind].append(took)
                irs[kind] = ir
        same = irs["plain"] == irs["modules"]
        plain, mods = (statistics.median(times[k]) for k in ("plain", "modules"))
        print(f"| {a.resources} resources | plain list | {a.modules} modules | ratio | same IR |")
        print("|---|---|---|---|---|")
        print(f"| nix eval of the IR (median of {a.reps}) | {plain:.2f} s | {mods:.2f} s | {mods / plain:.2f} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The latency benchmark of the streaming fixpoint (issue 44, DESIGN §89): how long an apply takes
when providers are slow, against the bound the DAG allows.

For each DAG shape it applies a fresh project of the fake `alpha_token`s (the fakes sleep per
label: NIVIS_FAKE_LATENCY_MS) twice, each on an empty state:

  * streaming: `nivis apply` as it runs by default (evaluation waves join a running phase);
  * phased: the same with `--max-phases 1000`, which keeps every phase whole (the barrier of the
    phase loop before §89), for comparison on the same build;

and reports the makespan (wall time of the apply), Nix's total time, and the bound: the longest
path through the DAG where a resource costs its latency and each Nix-computed edge one
evaluation (the median evaluation time measured in the streaming run).

Shapes:
  barrier   s1 (3 s, unrelated) | f1 (0 s) -Nix-> s2 (3 s)
  chain3    slow (3 s) beside c0 -Nix-> c1 -Nix-> c2 -Nix-> c3 (0.5 s each)
  random200 200 resources, random DAG (seeded), 30% of the edges Nix-computed, 0.2-2 s each
  wide10k   10000 resources in 5 hops of 2000 (each reads one of the hop before through Nix),
            zero latency: what evaluation costs

and, with `--terraform`, Terraform 1.0.3 on the same DAG: the same fake provider binary, loaded
through a `dev_overrides` CLI configuration (no `terraform init`), a Nix-computed edge written as
an interpolation ("k${alpha_token.r3.id}") and a plain edge as `depends_on`. Terraform talks to
the fake over go-plugin's automatic mutual TLS, as to a real provider (the fakes serve it when
the client sets PLUGIN_CLIENT_CERT, DESIGN §104); a failed Terraform run is reported as such,
not fatal.

Python 3.11 standard library only; not a test, it asserts nothing.

Usage:
    python3 bench/latency.py                  # all shapes
    python3 bench/latency.py --shapes barrier,chain3 --reps 3
    python3 bench/latency.py --quick          # barrier and chain3 once, 1000 instead of 10k
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def log(msg: str) -> None:
    print(f"[latency {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Dag:
    """Resources `n0..`, each with a latency (seconds) and dependencies (index, through Nix?)."""

    def __init__(self, name: str):
        self.name = name
        self.labels: list[str] = []
        self.latency: list[float] = []
        self.deps: list[list[tuple[int, bool]]] = []

    def add(self, label: str, latency: float, deps: list[tuple[int, bool]]) -> int:
        self.labels.append(label)
        self.latency.append(latency)
        self.deps.append(deps)
        return len(self.labels) - 1

    def latency_env(self) -> str:
        pairs = [f"{l}={int(round(s * 1000))}" for l, s in zip(self.labels, self.latency) if s > 0]
        return ",".join(pairs)

    def bound(self, evaluation: float, parallelism: int = 10) -> float:
        """The longest path (a resource costs its latency, a Nix edge one evaluation), or the
        work divided among the workers when that is longer."""
        finish: list[float] = []
        for i, deps in enumerate(self.deps):
            start = 0.0
            for d, nix in deps:
                start = max(start, finish[d] + (evaluation if nix else 0.0))
            finish.append(start + self.latency[i])
        return max(max(finish, default=0.0), sum(self.latency) / parallelism)

    def plan(self) -> str:
        lines = []
        for i, label in enumerate(self.labels):
            nix = [f'(r{d}.refAttr "id")' for d, via_nix in self.deps[i] if via_nix]
            plain = [f"r{d}" for d, via_nix in self.deps[i] if not via_nix]
            keeper = f' keeper = lib.str [ "k" {" ".join(nix)} ];' if nix else ""
            depends = f" dependsOn = [ {' '.join(plain)} ];" if plain else ""
            lines.append(
                f'  r{i} = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "r{i}";'
                f' config = {{ label = "{label}";{keeper} }};{depends} }};'
            )
        names = " ".join(f"r{i}" for i in range(len(self.labels)))
        return (
            f"let lib = import {REPO}/nix; in\nledger:\nlet\n"
            + "\n".join(lines)
            + f"\nin lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }};"
            f" resources = [ {names} ]; inherit ledger; }}\n"
        )


def barrier() -> Dag:
    d = Dag("barrier")
    d.add("s1", 3.0, [])
    f1 = d.add("f1", 0.0, [])
    d.add("s2", 3.0, [(f1, True)])
    return d


def chain3() -> Dag:
    d = Dag("chain3")
    d.add("slow", 3.0, [])
    prev = d.add("c0", 0.5, [])
    for k in range(1, 4):
        prev = d.add(f"c{k}", 0.5, [(prev, True)])
    return d


def random200(seed: int = 44) -> Dag:
    rng = random.Random(seed)
    d = Dag("random200")
    for i in range(200):
        deps = []
        if i > 0:
            for d_ in sorted(set(rng.randrange(max(0, i - 40), i) for _ in range(rng.randint(0, 2)))):
                deps.append((d_, rng.random() < 0.3))
        d.add(f"n{i}", round(rng.uniform(0.2, 2.0), 2), deps)
    return d


def wide(n: int, hops: int = 5) -> Dag:
    d = Dag(f"wide{n // 1000}k")
    per = n // hops
    for h in range(hops):
        for k in range(per):
            deps = [((h - 1) * per + k, True)] if h > 0 else []
            d.add(f"w{h}-{k}", 0.0, deps)
    return d


def terraform_config(dag: Dag) -> dict:
    res = {}
    for i, label in enumerate(dag.labels):
        r = {"label": label}
        nix = [f"${{alpha_token.r{d}.id}}" for d, via_nix in dag.deps[i] if via_nix]
        plain = [f"alpha_token.r{d}" for d, via_nix in dag.deps[i] if not via_nix]
        if nix:
            r["keeper"] = "k" + "".join(nix)
        if plain:
            r["depends_on"] = plain
        res[f"r{i}"] = r
    return {
        "terraform": {"required_providers": {"alpha": {"source": "nivis/alpha"}}},
        "resource": {"alpha_token": res},
    }


def terraform_apply(tf: Path, nivis: Path, dag: Dag, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    for p in work.glob("terraform.tfstate*"):
        p.unlink()
    plugins = work / "plugins"
    plugins.mkdir(exist_ok=True)
    link = plugins / "terraform-provider-alpha"
    if not link.exists():
        link.symlink_to(nivis.parent / "provider-alpha")
    rc = work / "terraform.tfrc"
    rc.write_text('provider_installation {\n  dev_overrides {\n'
                  f'    "registry.terraform.io/nivis/alpha" = {json.dumps(str(plugins))}\n'
                  '  }\n  direct {}\n}\n')
    (work / "main.tf.json").write_text(json.dumps(terraform_config(dag), indent=1))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update(TF_CLI_CONFIG_FILE=str(rc), CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1",
               NIVIS_FAKE_LATENCY_MS=dag.latency_env())
    argv = [str(tf), "apply", "-auto-approve", "-input=false", "-no-color", "-parallelism=10"]
    start = time.monotonic()
    r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if r.returncode != 0:
        log(f"{dag.name}: terraform apply failed ({r.returncode}): {r.stdout.strip()[:300]}")
        return {"wall": None}
    return {"wall": wall}


def find_terraform() -> Path | None:
    cached = Path.home() / ".cache/nivis/real-providers/terraform/terraform"
    env = os.environ.get("NIVIS_REAL_TERRAFORM")
    for c in [env, str(cached)]:
        if c and Path(c).is_file():
            return Path(c)
    return None


def find_nivis(arg: str | None) -> Path:
    for c in [arg, os.environ.get("NIVIS_BIN"),
              os.environ.get("CARGO_TARGET_DIR") and f"{os.environ['CARGO_TARGET_DIR']}/release/nivis",
              str(REPO / "target/release/nivis")]:
        if c and Path(c).is_file():
            return Path(c)
    raise SystemExit("no nivis binary: build with `cargo build --release --bins` or pass --nivis")


def apply(nivis: Path, dag: Dag, work: Path, extra: list[str]) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    (work / "plan.nix").write_text(dag.plan())
    state = work / "nivis.state.json"
    for p in work.glob("nivis.state.json*"):
        p.unlink()
    env = dict(os.environ)
    env["PATH"] = f"{nivis.parent}:{env.get('PATH', '')}"
    env["NIVIS_FAKE_LATENCY_MS"] = dag.latency_env()
    argv = [str(nivis), "apply", "--auto-approve", "--json", "--file", str(work / "plan.nix"),
            "--state", str(state), "--parallelism", "10", *extra]
    start = time.monotonic()
    r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    events = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode != 0:
        raise SystemExit(f"{dag.name}: apply failed ({r.returncode}):\n{r.stderr[-3000:]}")
    evals = [e["seconds"] for e in events if e.get("type") == "evaluated"]
    timing = next((e for e in events if e.get("type") == "timing"), {})
    waves = sum(1 for e in events if e.get("type") == "wave")
    return {"wall": wall, "evals": evals, "nix": timing.get("nixSeconds", sum(evals)), "waves": waves}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="barrier,chain3,random200,wide10k")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--nivis")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workdir")
    ap.add_argument("--terraform", action="store_true", help="also run Terraform 1.0.3 (see above)")
    args = ap.parse_args()
    nivis = find_nivis(args.nivis)
    tf = find_terraform() if args.terraform else None
    makers = {"barrier": barrier, "chain3": chain3, "random200": random200,
              "wide10k": lambda: wide(1000 if args.quick else 10000)}
    shapes = ["barrier", "chain3"] if args.quick else args.shapes.split(",")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="nivis-latency-"))
    rows = []
    for name in shapes:
        dag = makers[name]()
        runs = {"streaming": [], "phased": []}
        for rep in range(args.reps):
            for mode, extra in (("streaming", []), ("phased", ["--max-phases", "1000"])):
                res = apply(nivis, dag, work / name / mode, extra)
                runs[mode].append(res)
                log(f"{dag.name:<10} {mode:<9} rep {rep}: {res['wall']:7.2f}s  nix {res['nix']:6.2f}s"
                    f"  evaluations {len(res['evals'])}  waves {res['waves']}")
        tf_runs = []
        if tf is not None and len(dag.labels) <= 1000:
            for rep in range(args.reps):
                res = terraform_apply(tf, nivis, dag, work / name / "terraform")
                if res["wall"] is None:
                    break
                tf_runs.append(res["wall"])
                log(f"{dag.name:<10} terraform rep {rep}: {res['wall']:7.2f}s")
        s, p = runs["streaming"], runs["phased"]
        evaluation = statistics.median(e for r in s for e in r["evals"])
        bound = dag.bound(evaluation)
        rows.append({
            "shape": dag.name, "resources": len(dag.labels),
            "streaming": statistics.median(r["wall"] for r in s),
            "phased": statistics.median(r["wall"] for r in p),
            "bound": bound, "evaluation": evaluation,
            "nix_streaming": statistics.median(r["nix"] for r in s),
            "nix_phased": statistics.median(r["nix"] for r in p),
            "evals_streaming": len(s[0]["evals"]), "evals_phased": len(p[0]["evals"]),
            "terraform": statistics.median(tf_runs) if tf_runs else None,
        })
    print("| shape | resources | streaming (s) | phased, before §89 (s) | Terraform 1.0.3 (s) | bound (s) "
          "| streaming / bound | one evaluation (s) | Nix total streaming / phased (s) "
          "| evaluations streaming / phased |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        tf_cell = f"{r['terraform']:.2f}" if r["terraform"] is not None else "not run"
        print(f"| {r['shape']} | {r['resources']} | {r['streaming']:.2f} | {r['phased']:.2f} | {tf_cell} | {r['bound']:.2f} "
              f"| {r['streaming'] / r['bound']:.2f} | {r['evaluation']:.2f} "
              f"| {r['nix_streaming']:.2f} / {r['nix_phased']:.2f} | {r['evals_streaming']} / {r['evals_phased']} |")


if __name__ == "__main__":
    main()

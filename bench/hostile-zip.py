#!/usr/bin/env python3
"""How long Nivis takes to refuse a provider zip bomb (issue 13).

The bomb: one entry of 1 GiB of zeros (about 1 MiB deflated), listed 64 times in the central
directory under different names, all pointing at the same data: 64 GiB declared. It sits in a
filesystem mirror as hashicorp/null 2.1.2 for this platform; `nivis providers list --offline`
is asked to install it, once with a lock file whose hashes it does not match, once without a
lock file (the mirror is trusted; the zip's shape is what refuses it). A plan declaring no
registry provider gives the baseline (Nix evaluation and start-up), which is subtracted.

    python3 bench/hostile-zip.py [--nivis PATH] [--reps N]

Standard library only; needs `nix` on PATH and a release build of nivis. Measures, asserts
nothing about time; it fails only if a run is not refused or refuses for another reason.
"""

import argparse
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENTRY = "terraform-provider-null_v2.1.2_x4"


def nivis_path(arg):
    if arg:
        return arg
    if os.environ.get("NIVIS_BIN"):
        return os.environ["NIVIS_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
    return str(Path(target) / "release" / "nivis")


def bomb(copies=64, gib=1):
    """A zip whose central directory lists one deflated entry `copies` times."""
    comp = zlib.compressobj(1, zlib.DEFLATED, -15)
    chunk = bytes(1 << 20)
    data = b"".join(comp.compress(chunk) for _ in range(gib * 1024)) + comp.flush()
    size = gib << 30
    crc = 0
    for _ in range(gib * 1024):
        crc = zlib.crc32(chunk, crc)
    name = ENTRY.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), size, len(name), 0)
    out = bytearray(local + name + data)
    cd_start = len(out)
    for i in range(copies):
        n = name if i == 0 else f"copy-{i}".encode()
        out += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, 0, 8, 0, 0, crc, len(data), size,
            len(n), 0, 0, 0, 0, 0o100755 << 16, 0,
        ) + n
    cd_size = len(out) - cd_start
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, copies, copies, cd_size, cd_start, 0)
    return bytes(out)


def platform_name():
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return f"{sys.platform}_{arch}"


def run(nivis, workdir, plan, lock):
    lock_path = workdir / ".terraform.lock.hcl"
    if lock:
        lock_path.write_text(lock)
    elif lock_path.exists():
        lock_path.unlink()
    argv = [nivis, "providers", "list", "--offline", "--file", str(plan),
            "--mirror", str(workdir / "mirror"), "--provider-cache", str(workdir / "cache"),
            "--lock-file", str(lock_path)]
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, cwd=workdir)
    return time.monotonic() - start, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nivis")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    nivis = nivis_path(args.nivis)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        t0 = time.monotonic()
        zip_bytes = bomb()
        built = time.monotonic() - t0
        pdir = work / "mirror" / "registry.opentofu.org" / "hashicorp" / "null"
        pdir.mkdir(parents=True)
        (pdir / f"terraform-provider-null_2.1.2_{platform_name()}.zip").write_bytes(zip_bytes)
        lib = f"let lib = import {REPO}/nix; in\n"
        plan = work / "plan.nix"
        plan.write_text(lib + 'ledger: lib.toIR { providers.null = lib.mkProvider { source = "hashicorp/null"; }; inherit ledger; }\n')
        empty = work / "empty.nix"
        empty.write_text(lib + "ledger: lib.toIR { inherit ledger; }\n")
        lock = (
            'provider "registry.opentofu.org/hashicorp/null" {\n  version = "2.1.2"\n  hashes = [\n'
            '    "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",\n'
            f'    "zh:{"0" * 64}",\n  ]\n}}\n'
        )
        cases = [("baseline (no registry provider)", empty, None, None),
                 ("bomb, lock file with other hashes", plan, lock, "overlap"),
                 ("bomb, no lock file (trusted mirror)", plan, None, "overlap")]
        results = []
        for label, p, lk, needle in cases:
            times = []
            run(nivis, work, p, lk)  # warm-up: Nix's evaluation cache, page cache
            for _ in range(args.reps):
                took, out = run(nivis, work, p, lk)
                if needle is None and out.returncode != 0:
                    sys.exit(f"{label}: failed: {out.stderr}")
                if needle is not None and (out.returncode == 0 or needle not in out.stderr):
                    sys.exit(f"{label}: not refused by the shape check:\n{out.stderr}")
                times.append(took)
            if any((work / "cache").rglob("terraform-provider-null*")):
                sys.exit(f"{label}: something reached the cache")
            results.append((label, statistics.median(times)))
        base = results[0][1]
        print(f"bomb: {len(zip_bytes)} bytes, 64 entries x 1 GiB declared (built in {built:.1f} s)")
        for label, med in results:
            extra = "" if med is base else f"  (refusal: {1000 * (med - base):.0f} ms over the baseline)"
            print(f"{label}: median {1000 * med:.0f} ms of {args.reps}{extra}")


if __name__ == "__main__":
    main()

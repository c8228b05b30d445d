#!/usr/bin/env python3
"""Nivis and Terraform 1.0.3, side by side, on the same real provider (terraform-provider-null 2.1.2).

What it does (see bench/README.md for the full method):

  * fetches (or finds cached) the pinned, sha256-verified provider and Terraform binaries with
    tests/fetch-providers.py, and lays the provider out as an offline Terraform filesystem mirror;
  * for every workload (N independent null_resources, a dependency chain, and the two-provider
    phased example with a Nix-mediated chain) runs, per repetition, the steps
        plan (fresh) -> apply -> no-op plan (with refresh) -> destroy
    for Terraform and for Nivis alternately (the order flips every repetition, so machine drift
    and cache warmth hit both engines alike), all with parallelism 10;
  * measures wall time and the peak RSS of the whole process tree (every ~20 ms it sums VmRSS of
    the spawned command and all its descendants: Nix evaluators, provider plugins), and for Nivis
    splits the wall time into Nix evaluation, provider calls and its own overhead;
  * prints the tables and writes them, with the machine and the exact command, to
    docs/benchmarks.md (or --out).

Python 3.11 standard library only. Not a test: it asserts nothing, it measures (but it does
check every step did what it should and lists anything that did not under "Anomalies").

Usage:
    python3 bench/run.py                       # full run: N = 100, 1000, 10000, 100000, chain 100, phased
    python3 bench/run.py --quick               # smoke run: 1 repetition, small sizes, out of docs/
    python3 bench/run.py --reps 3 --sizes 100,1000 --reps-large 1
    python3 bench/run.py --sizes 100000 --chain 0 --hops 0   # 100k alone (Terraform estimated)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEPS = ["plan", "apply", "noop-plan", "destroy"]
STEP_LABEL = {
    "plan": "plan (fresh)",
    "apply": "apply",
    "noop-plan": "no-op plan (refresh)",
    "destroy": "destroy",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")
STEP_TIMEOUT = 3600.0


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Process-tree sampling
# --------------------------------------------------------------------------------------------


def _read_stat(pid: int) -> tuple[str, str, int, int, int, int, int] | None:
    """(comm, state, ppid, utime+stime ticks, starttime, cutime+cstime ticks, threads) or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    lp, rp = data.find("("), data.rfind(")")
    comm = data[lp + 1 : rp]
    rest = data[rp + 2 :].split()
    # rest[0] is field 3 (state); field k is rest[k - 3].
    try:
        return (
            comm,
            rest[0],
            int(rest[1]),
            int(rest[11]) + int(rest[12]),
            int(rest[19]),
            int(rest[13]) + int(rest[14]),
            int(rest[17]),
        )
    except (IndexError, ValueError):
        return None


def _read_rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes; zeros if the process is gone."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return rss, hwm


def category(comm: str) -> str:
    if comm == "nivis":
        return "nivis"
    if comm == "nix" or comm.startswith("nix-"):
        return "nix"
    if comm == "terraform":
        return "terraform"
    if comm.startswith("terraform-prov") or comm.startswith("provider-"):
        return "provider"
    return "other"


class TreeSampler(threading.Thread):
    """Polls /proc every `interval` seconds for the process tree under `root` and records the
    maximum of the summed VmRSS, the maximum per category, and each process's last CPU time."""

    def __init__(self, root: int, interval: float = 0.02):
        super().__init__(daemon=True)
        self.root = root
        self.interval = interval
        self.stop_event = threading.Event()
        self.ppid: dict[int, tuple[int, int]] = {}  # pid -> (starttime, ppid) of non-members seen
        self.members: dict[int, int] = {}  # pid -> starttime (sticky: reparenting keeps members)
        self.cpu: dict[tuple[int, int], tuple[str, int]] = {}  # (pid, start) -> (category, ticks)
        self.peak = 0
        self.max_hwm = 0  # the largest single-process high-water mark seen (VmHWM)
        self.peak_by_cat: dict[str, int] = {}
        # (pid, start) -> (category, VmHWM): each process's own peak, for the split by process.
        self.hwm_by_proc: dict[tuple[int, int], tuple[str, int]] = {}
        self.samples = 0
        self.max_procs = 0
        st = _read_stat(root)
        if st:
            self.members[root] = st[4]

    def sample(self) -> None:
        try:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return
        alive = set(pids)
        stats: dict[int, tuple] = {}
        # Learn the parent of every pid we have not classified yet.
        for pid in pids:
            if pid in self.members or pid in self.ppid:
                continue
            st = _read_stat(pid)
            if st is None:
                continue
            stats[pid] = st
            self.ppid[pid] = (st[4], st[2])
        # Grow the member set to a fixpoint (a child's pid may be lower than its parent's).
        grown = True
        while grown:
            grown = False
            for pid, (start, parent) in list(self.ppid.items()):
                if parent in self.members and pid not in self.members:
                    self.members[pid] = start
                    del self.ppid[pid]
                    grown = True
        total = 0
        by_cat: dict[str, int] = {}
        n = 0
        for pid, start in list(self.members.items()):
            if pid not in alive:
                del self.members[pid]
                continue
            st = stats.get(pid) or _read_stat(pid)
            if st is None or st[4] != start:
                self.members.pop(pid, None)
                continue
            if st[1] == "Z":
                continue
            cat = category(st[0])
            self.cpu[(pid, start)] = (cat, st[3])
            rss, hwm = _read_rss(pid)
            self.max_hwm = max(self.max_hwm, hwm)
            if hwm:
                self.hwm_by_proc[(pid, start)] = (cat, hwm)
            total += rss
            by_cat[cat] = by_cat.get(cat, 0) + rss
            n += 1
        # Forget classifications of pids that are gone (so a reused pid is looked at again).
        for pid in [p for p in self.ppid if p not in alive]:
            del self.ppid[pid]
        self.samples += 1
        self.max_procs = max(self.max_procs, n)
        self.peak = max(self.peak, total)
        for cat, v in by_cat.items():
            self.peak_by_cat[cat] = max(self.peak_by_cat.get(cat, 0), v)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(self.interval)

    def largest_by_category(self) -> dict[str, list[int]]:
        """Per category: [the largest single process's peak RSS (VmHWM), processes seen]."""
        out: dict[str, list[int]] = {}
        for cat, hwm in self.hwm_by_proc.values():
            entry = out.setdefault(cat, [0, 0])
            entry[0] = max(entry[0], hwm)
            entry[1] += 1
        return out

    def cpu_by_category(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for cat, ticks in self.cpu.values():
            out[cat] = out.get(cat, 0.0) + ticks / CLK_TCK
        return out


def _busy_seconds() -> float:
    """CPU seconds all CPUs of the machine have been busy since boot (/proc/stat)."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in parts[1:9])
        return (user + nice + system + irq + softirq + steal) / CLK_TCK
    except (OSError, ValueError):
        return 0.0


def wait_for_idle(limit: float, threshold: float = 0.25) -> float:
    """Waits (at most `limit` seconds) until other processes keep fewer than `threshold` CPUs busy
    over one second; returns the load of the last window (CPUs busy)."""
    deadline = time.monotonic() + limit
    while True:
        b0, s0, t0 = _busy_seconds(), os.times(), time.monotonic()
        time.sleep(1.0)
        s1 = os.times()
        mine = (s1.user - s0.user) + (s1.system - s0.system)
        load = max(0.0, _busy_seconds() - b0 - mine) / (time.monotonic() - t0)
        if load < threshold or time.monotonic() >= deadline:
            return load
        time.sleep(2.0)


@dataclasses.dataclass
class RunResult:
    rc: int
    wall: float
    peak_rss: int
    peak_rss_by_cat: dict
    largest_by_cat: dict  # category -> [largest single process's VmHWM, processes seen]
    cpu_by_cat: dict
    cpu_total: float
    samples: int
    max_procs: int
    stdout_path: Path
    stderr_path: Path
    lines: list  # (seconds since start, line) when the output was streamed
    foreign_cpu: float  # CPU seconds used meanwhile by processes outside the benchmark


def run_measured(
    argv: list[str],
    cwd: Path,
    env: dict,
    out_base: Path,
    stream: bool,
    timeout: float = STEP_TIMEOUT,
) -> RunResult:
    """Runs argv, sampling its process tree; with `stream`, timestamps every stdout line."""
    stdout_path = out_base.with_suffix(".stdout")
    stderr_path = out_base.with_suffix(".stderr")
    lines: list = []
    busy0, self0 = _busy_seconds(), os.times()
    with open(stderr_path, "wb") as err, open(stdout_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stream else out,
            stderr=err,
            start_new_session=True,
        )
        sampler = TreeSampler(proc.pid)
        sampler.start()
        reader = None
        if stream:
            assert proc.stdout is not None

            def read() -> None:
                for raw in proc.stdout:
                    lines.append((time.perf_counter() - t0, raw))
                    out.write(raw)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
        deadline = t0 + timeout
        timed_out = False
        while True:
            # WNOWAIT: the process stays a zombie, so its final CPU times can still be read.
            res = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            if res is not None and res.si_pid == proc.pid:
                break
            if time.perf_counter() > deadline and not timed_out:
                timed_out = True
                log(f"timeout after {timeout:.0f}s: killing {argv[0]}")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        sampler.stop_event.set()
        sampler.join()
        final = _read_stat(proc.pid)
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if reader is not None:
            reader.join()
    self1 = os.times()
    own_cpu = (self1.user - self0.user) + (self1.system - self0.system)
    foreign = max(0.0, _busy_seconds() - busy0 - own_cpu - (rusage.ru_utime + rusage.ru_stime))
    cpu = sampler.cpu_by_category()
    if final is not None:
        # The zombie's own CPU time is exact; replace the last (up to 20 ms old) sample.
        cat = category(final[0])
        cpu[cat] = cpu.get(cat, 0.0) - sampler.cpu.get((proc.pid, final[4]), (cat, 0))[1] / CLK_TCK
        cpu[cat] += final[3] / CLK_TCK
    return RunResult(
        rc=-9 if timed_out else proc.returncode,
        wall=wall,
        # Polling can miss a short peak; the kernel's high-water mark (VmHWM) of the largest
        # single process seen is a floor for the tree's peak. (Not ru_maxrss from wait4: Linux
        # carries the pre-exec RSS of the forking Python process into it.)
        peak_rss=max(sampler.peak, sampler.max_hwm),
        peak_rss_by_cat=dict(sampler.peak_by_cat),
        largest_by_cat=sampler.largest_by_category(),
        cpu_by_cat=cpu,
        cpu_total=rusage.ru_utime + rusage.ru_stime,
        samples=sampler.samples,
        max_procs=sampler.max_procs,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        lines=lines,
        foreign_cpu=foreign,
    )


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Workload:
    key: str
    title: str
    kind: str  # independent | chain | phased
    n: int  # resources
    reps: int
    terraform: bool
    skip_note: str = ""
    tf_estimate: dict = dataclasses.field(default_factory=dict)  # step -> seconds, when skipped


def nix_str(s: str) -> str:
    return json.dumps(s).replace("${", "\\${")


def nivis_plan(w: Workload, null_bin: str) -> str:
    header = f"# generated by bench/run.py: {w.title}\nlet\n  lib = import {nix_str(str(REPO / 'nix'))};\n"
    if w.kind == "independent":
        return header + (
            "in\nledger: lib.toIR {\n"
            f"  providers.null = lib.mkProvider {{ source = {nix_str(null_bin)}; }};\n"
            f"  resources = lib.count {w.n} (i: lib.mkResource {{\n"
            '    provider = "null"; type = "null_resource"; name = "r";\n'
            "    config.triggers = { i = toString i; };\n"
            "  });\n"
            "  inherit ledger;\n}\n"
        )
    if w.kind == "chain":
        # Resource i references the id of resource i - 1 directly (a TF->TF reference, which the
        # executor resolves itself within the phase).
        return header + (
            f"  rs = lib.count {w.n} (i: lib.mkResource {{\n"
            '    provider = "null"; type = "null_resource"; name = "r";\n'
            "    config.triggers = { i = toString i; }\n"
            '      // (if i == 0 then { } else { prev = (builtins.elemAt rs (i - 1)).refAttr "id"; });\n'
            "  });\n"
            "in\nledger: lib.toIR {\n"
            f"  providers.null = lib.mkProvider {{ source = {nix_str(null_bin)}; }};\n"
            "  resources = rs;\n"
            "  inherit ledger;\n}\n"
        )
    if w.kind == "phased":
        # Hop k is built by Nix from hop k-1's output (lib.str), so every hop needs a new
        # evaluation: alpha_token -> beta_record -> alpha_token -> ... (w.n resources, w.n - 1 hops).
        return header + (
            "  inherit (lib) mkResource str;\n"
            "  hop = k: prev:\n"
            "    if k - (k / 2) * 2 == 0 then mkResource {\n"
            '      provider = "alpha"; type = "alpha_token"; name = "h${toString k}";\n'
            '      config = if prev == null then { } else { label = str [ "x-" (prev.refAttr "endpoint") ]; };\n'
            "    } else mkResource {\n"
            '      provider = "beta"; type = "beta_record"; name = "h${toString k}";\n'
            '      config.from = str [ "x-" (prev.refAttr "value") ];\n'
            "    };\n"
            f"  hops = builtins.genList (k: hop k (if k == 0 then null else builtins.elemAt hops (k - 1))) {w.n};\n"
            "  last = builtins.elemAt hops (builtins.length hops - 1);\n"
            "in\nledger: lib.toIR {\n"
            "  providers = {\n"
            '    alpha = lib.mkProvider { source = "provider-alpha"; };\n'
            '    beta = lib.mkProvider { source = "provider-beta"; };\n'
            "  };\n"
            "  resources = hops;\n"
            f'  consumers.result = {{ end = last.refAttr "{"value" if (w.n - 1) % 2 == 0 else "endpoint"}"; }};\n'
            "  inherit ledger;\n}\n"
        )
    raise ValueError(w.kind)


def terraform_config(w: Workload) -> dict:
    tf = {"required_providers": {"null": {"source": "hashicorp/null", "version": "2.1.2"}}}
    if w.kind == "independent":
        res = {"r": {"count": w.n, "triggers": {"i": "${count.index}"}}}
    elif w.kind == "chain":
        res = {}
        for i in range(w.n):
            trig = {"i": str(i)}
            if i:
                trig["prev"] = "${null_resource.r__%d.id}" % (i - 1)
            res[f"r__{i}"] = {"triggers": trig}
    else:
        raise ValueError(w.kind)
    return {"terraform": tf, "resource": {"null_resource": res}}


# --------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------


def parse_duration(s: str) -> float:
    m = re.fullmatch(r"([0-9.]+)(ns|µs|us|ms|s)", s)
    if not m:
        return 0.0
    return float(m.group(1)) * {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


class Env:
    def __init__(self, args, work: Path):
        self.args = args
        self.work = work
        # Run private copies: the build directory may be rebuilt while the benchmark runs, and one
        # run must measure one binary. The fakes go next to it (plan sources "provider-alpha"
        # resolve next to the nivis binary).
        self.nivis_origin = Path(args.nivis).resolve()
        bindir = work / "bin"
        bindir.mkdir(parents=True, exist_ok=True)
        for name in ("nivis", "provider-alpha", "provider-beta"):
            src = self.nivis_origin if name == "nivis" else self.nivis_origin.parent / name
            if src.exists():
                shutil.copy2(src, bindir / name)
        self.nivis = str(bindir / "nivis")
        self.nivis_sha = sha256(Path(self.nivis))
        paths = fetch_binaries()
        self.null_bin = paths["NIVIS_REAL_NULL"]
        self.terraform = paths["NIVIS_REAL_TERRAFORM"]
        # Terraform's offline filesystem mirror (unpacked layout), holding a byte-identical copy.
        self.mirror = work / "tf-mirror"
        dest = self.mirror / "registry.terraform.io/hashicorp/null/2.1.2/linux_amd64"
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / Path(self.null_bin).name
        if not target.exists():
            shutil.copy2(self.null_bin, target)
        if sha256(target) != sha256(Path(self.null_bin)):
            raise SystemExit("the mirror copy of the null provider differs from the verified binary")
        self.tfrc = work / "terraform.tfrc"
        self.tfrc.write_text(
            "provider_installation {\n  filesystem_mirror {\n"
            f"    path    = {json.dumps(str(self.mirror))}\n"
            '    include = ["registry.terraform.io/hashicorp/null"]\n  }\n}\n'
        )
        base = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
        base.pop("NIVIS_LOG", None)
        self.tf_env = dict(
            base,
            TF_CLI_CONFIG_FILE=str(self.tfrc),
            CHECKPOINT_DISABLE="1",
            TF_IN_AUTOMATION="1",
        )
        self.nivis_env = dict(base, NO_COLOR="1")


def sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_binaries() -> dict:
    out = subprocess.run(
        [sys.executable, str(REPO / "tests/fetch-providers.py"), "--only", "null,terraform", "--print-env"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    paths = {}
    for line in out.splitlines():
        m = re.match(r"export (\w+)=(.*)$", line.strip())
        if m:
            paths[m.group(1)] = shlex.split(m.group(2))[0]
    for k in ("NIVIS_REAL_NULL", "NIVIS_REAL_TERRAFORM"):
        if k not in paths:
            raise SystemExit(f"tests/fetch-providers.py did not print {k}")
    return paths


def setup_terraform(env: Env, w: Workload) -> Path:
    d = env.work / w.key / "terraform"
    d.mkdir(parents=True, exist_ok=True)
    (d / "main.tf.json").write_text(json.dumps(terraform_config(w), indent=1) + "\n")
    r = subprocess.run(
        [env.terraform, "init", "-input=false", "-no-color"],
        cwd=d,
        env=env.tf_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if r.returncode != 0:
        raise SystemExit(f"terraform init failed in {d}:\n{r.stdout}")
    return d


def setup_nivis(env: Env, w: Workload) -> Path:
    d = env.work / w.key / "nivis"
    d.mkdir(parents=True, exist_ok=True)
    (d / "plan.nix").write_text(nivis_plan(w, env.null_bin))
    return d


def clean_terraform(d: Path) -> None:
    for name in ("terraform.tfstate", "terraform.tfstate.backup", ".terraform.tfstate.lock.info"):
        (d / name).unlink(missing_ok=True)


def clean_nivis(d: Path) -> None:
    for p in d.glob("nivis.state.json*"):
        p.unlink()


def terraform_argv(env: Env, step: str) -> list[str]:
    par = f"-parallelism={env.args.parallelism}"
    common = ["-input=false", "-no-color", par]
    if step in ("plan", "noop-plan"):
        return [env.terraform, "plan", *common]
    if step == "apply":
        return [env.terraform, "apply", *common, "-auto-approve"]
    return [env.terraform, "destroy", *common, "-auto-approve"]


def nivis_argv(env: Env, d: Path, step: str) -> list[str]:
    verb = {"plan": "plan", "noop-plan": "plan", "apply": "apply", "destroy": "destroy"}[step]
    argv = [
        env.nivis, verb, "--file", str(d / "plan.nix"), "--state", str(d / "nivis.state.json"),
        "--json", "-v", "--parallelism", str(env.args.parallelism),
    ]
    if verb in ("apply", "destroy"):
        argv.append("--auto-approve")
    return argv


def check_terraform(step: str, n: int, out: str, rc: int) -> list[str]:
    problems = []
    if rc != 0:
        problems.append(f"exit code {rc}")
    expect = {
        "plan": f"Plan: {n} to add, 0 to change, 0 to destroy.",
        "apply": f"Apply complete! Resources: {n} added, 0 changed, 0 destroyed.",
        "noop-plan": "No changes.",
        "destroy": f"Destroy complete! Resources: {n} destroyed.",
    }[step]
    if expect not in out:
        problems.append(f"output lacks {expect!r}")
    return problems


def analyse_nivis(step: str, n: int, res: RunResult, parallelism: int) -> tuple[dict, list[str]]:
    events = []
    for t, raw in res.lines:
        try:
            ev = json.loads(raw)
        except ValueError:
            continue
        ev["_t"] = t
        events.append(ev)
    stderr = res.stderr_path.read_text(errors="replace")
    problems = []
    if res.rc != 0:
        problems.append(f"exit code {res.rc}: {stderr.strip()[-400:]}")
    evals = [e for e in events if e["type"] == "evaluated"]
    fin = [e for e in events if e["type"] == "finished"]
    planned = [e for e in events if e["type"] == "planned"]
    fix = [e for e in events if e["type"] == "fixpoint"]
    bad = [e for e in events if e["type"] in ("failed", "skipped", "drift", "warning", "phase-limit")]
    for e in bad[:5]:
        problems.append(f"event {json.dumps({k: v for k, v in e.items() if k != '_t'})[:300]}")
    actions: dict[str, int] = {}
    for e in planned:
        actions[e["action"]] = actions.get(e["action"], 0) + 1
    finished_actions: dict[str, int] = {}
    for e in fin:
        finished_actions[e["action"]] = finished_actions.get(e["action"], 0) + 1
    if step == "plan" and actions.get("create", 0) == 0:
        problems.append(f"fresh plan planned no creates ({actions})")
    if step == "apply" and finished_actions.get("create", 0) != n:
        problems.append(f"apply created {finished_actions.get('create', 0)} of {n}")
    if step == "noop-plan":
        changing = {a: c for a, c in actions.items() if a not in ("no-op", "noop", "read")}
        if changing:
            problems.append(f"no-op plan plans changes: {changing}")
    if step == "destroy" and finished_actions.get("delete", 0) != n:
        problems.append(f"destroy deleted {finished_actions.get('delete', 0)} of {n}")
    nix = sum(e["seconds"] for e in evals)
    startups = [parse_duration(m) for m in re.findall(r"\) in ([0-9.]+(?:ns|µs|us|ms|s))\s*$", stderr, re.M)]
    timing = next((e for e in reversed(events) if e["type"] == "timing"), None)
    if timing is None:
        problems.append("no timing event: is this an older nivis?")
        timing = {"nixSeconds": nix, "providerSeconds": 0.0, "providerCalls": 0,
                  "providerCallSecondsSummed": 0.0}
    # Nivis measures the union of in-flight provider calls, start-ups and shutdowns itself;
    # everything else in the process's wall time (its start, IR ingest, scheduling, state,
    # rendering, exit) is its own.
    provider = timing["providerSeconds"]
    summed = timing["providerCallSecondsSummed"]
    own = max(0.0, res.wall - nix - provider)
    # If the calls had kept all `parallelism` workers busy, they would have needed only
    # Σ seconds / parallelism of wall time: the rest is an upper bound for own overhead.
    own_max = max(0.0, res.wall - nix - sum(startups) - summed / parallelism)
    info = {
        "nix": nix,
        "nix_per_eval": [e["seconds"] for e in evals],
        "evaluations": len(evals),
        "apply_phases": fix[-1]["applyPhases"] if fix else None,
        "provider": provider,
        "provider_startup": sum(startups),
        "calls": timing["providerCalls"],
        "sum_calls_over_par": summed / parallelism,
        "own": own,
        "own_max": own_max,
        "planned_actions": actions,
        "finished_actions": finished_actions,
        "per_phase_nix": [(e.get("phase"), e["seconds"]) for e in evals],
    }
    return info, problems


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args, env: Env):
        self.args = args
        self.env = env
        # results[wkey][engine][step] -> list of per-rep dicts
        self.results: dict = {}
        self.anomalies: list[str] = []
        self.notes: list[str] = []
        self.busy_starts = 0  # steps started on a busy machine after --wait-idle gave up

    def record(self, w: Workload, engine: str, step: str, rep: int, res: RunResult, extra: dict) -> None:
        entry = {
            "rep": rep,
            "rc": res.rc,
            "wall": res.wall,
            "peak_rss": res.peak_rss,
            "peak_rss_by_cat": res.peak_rss_by_cat,
            "largest_by_cat": res.largest_by_cat,
            "cpu_by_cat": res.cpu_by_cat,
            "cpu_total": res.cpu_total,
            "samples": res.samples,
            "max_procs": res.max_procs,
            "foreign_cpu": res.foreign_cpu,
            **extra,
        }
        self.results.setdefault(w.key, {}).setdefault(engine, {}).setdefault(step, []).append(entry)

    def settle(self) -> None:
        if self.args.wait_idle > 0:
            load = wait_for_idle(self.args.wait_idle)
            if load >= 0.25:
                self.busy_starts += 1

    def cycle_terraform(self, w: Workload, d: Path, rep: int) -> None:
        clean_terraform(d)
        for step in STEPS:
            self.settle()
            base = d / f"rep{rep}-{step}"
            res = run_measured(terraform_argv(self.env, step), d, self.env.tf_env, base, stream=False)
            out = res.stdout_path.read_text(errors="replace")
            problems = check_terraform(step, w.n, out, res.rc)
            for p in problems:
                self.anomalies.append(f"Terraform {w.key} rep {rep} {step}: {p}")
            self.record(w, "terraform", step, rep, res, {"problems": problems})
            log(f"  terraform {w.key:<12} rep {rep} {step:<10} {res.wall:8.2f}s  {res.peak_rss / 2**20:7.1f} MB"
                + ("  PROBLEM: " + "; ".join(problems) if problems else ""))

    def cycle_nivis(self, w: Workload, d: Path, rep: int) -> None:
        clean_nivis(d)
        for step in STEPS:
            self.settle()
            base = d / f"rep{rep}-{step}"
            res = run_measured(nivis_argv(self.env, d, step), d, self.env.nivis_env, base, stream=True)
            info, problems = analyse_nivis(step, w.n, res, self.args.parallelism)
            for p in problems:
                self.anomalies.append(f"Nivis {w.key} rep {rep} {step}: {p}")
            self.record(w, "nivis", step, rep, res, {"problems": problems, **info})
            log(f"  nivis     {w.key:<12} rep {rep} {step:<10} {res.wall:8.2f}s  {res.peak_rss / 2**20:7.1f} MB"
                f"  nix {info['nix']:.2f}s x{info['evaluations']}"
                + (f"  phases {info['apply_phases']}" if info["apply_phases"] is not None else "")
                + ("  PROBLEM: " + "; ".join(problems) if problems else ""))

    def warm_up(self, w: Workload, tf_dir: Path | None, nv_dir: Path) -> None:
        """One untimed fresh plan per engine: page cache, provider binary, Nix library. For the
        phased example a whole untimed cycle, since its later providers start only in apply."""
        clean_nivis(nv_dir)
        steps = STEPS if w.kind == "phased" else ["plan"]
        for step in steps:
            subprocess.run(nivis_argv(self.env, nv_dir, step), cwd=nv_dir, env=self.env.nivis_env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        clean_nivis(nv_dir)
        if tf_dir is not None:
            subprocess.run(terraform_argv(self.env, "plan"), cwd=tf_dir, env=self.env.tf_env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def run_workload(self, w: Workload) -> None:
        log(f"workload {w.key}: {w.title}, {w.reps} repetition(s)"
            + ("" if w.terraform else " (Nivis only)"))
        tf_dir = setup_terraform(self.env, w) if w.terraform else None
        nv_dir = setup_nivis(self.env, w)
        self.warm_up(w, tf_dir, nv_dir)
        for rep in range(w.reps):
            order = ["terraform", "nivis"] if rep % 2 == 0 else ["nivis", "terraform"]
            for engine in order:
                if engine == "terraform":
                    if tf_dir is not None:
                        self.cycle_terraform(w, tf_dir, rep)
                else:
                    self.cycle_nivis(w, nv_dir, rep)

    def median(self, wkey: str, engine: str, step: str, field: str):
        vals = [r[field] for r in self.results.get(wkey, {}).get(engine, {}).get(step, []) if r.get(field) is not None]
        return statistics.median(vals) if vals else None


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def fmt_s(v) -> str:
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:.0f} s"
    if v >= 10:
        return f"{v:.1f} s"
    return f"{v:.2f} s"


def fmt_mb(v) -> str:
    return "—" if v is None else f"{v / 2**20:.0f} MB"


def fmt_ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:.3f}" if r < 0.1 else f"{r:.2f}"


def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    osname = ""
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                osname = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "kernel": platform.release(),
        "os": osname,
    }


def tool_versions(env: Env) -> dict:
    def first(argv):
        try:
            return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=60).stdout.strip().splitlines()[0]
        except Exception as e:  # noqa: BLE001
            return f"({e})"

    commit = first(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    built = _dt.datetime.fromtimestamp(Path(env.nivis).stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    return {
        "nivis": f"{first([env.nivis, '--version'])} (release build {env.nivis_origin}, built {built}, "
                 f"sha256 {env.nivis_sha[:16]}…); repo at {commit}"
                 + (" with uncommitted changes" if dirty else ""),
        "terraform": first([env.terraform, "version"]),
        "provider": f"terraform-provider-null 2.1.2 ({Path(env.null_bin).name}, sha256 {sha256(Path(env.null_bin))[:16]}…)",
        "nix": first(["nix", "--version"]),
        "python": platform.python_version(),
    }


def render(bench: Bench, workloads: list[Workload], meta: dict) -> str:
    L: list[str] = []
    a = bench.args
    L.append("# Benchmarks: Nivis and Terraform 1.0.3 on the same provider")
    L.append("")
    L.append("Generated by `bench/run.py` (see [bench/README.md](../bench/README.md) for the method). "
             "Re-run it and replace this file whenever the engine changes materially.")
    L.append("")
    L.append(f"- Run: {meta['started']} → {meta['finished']} ({meta['duration'] / 60:.1f} min)")
    L.append(f"- Command: `{meta['command']}`")
    m = meta["machine"]
    L.append(f"- Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}"
             + (f", {m['os']}" if m["os"] else ""))
    v = meta["versions"]
    L.append(f"- Nivis: {v['nivis']}")
    L.append(f"- Terraform: {v['terraform']}; provider: {v['provider']}")
    L.append(f"- Nix: {v['nix']}; Python {v['python']}")
    L.append(f"- Parallelism {a.parallelism} for both engines; every figure is the median of the "
             "repetitions listed per workload; Terraform and Nivis ran alternately (order flipped every "
             "repetition), each repetition from empty state: plan (fresh) → apply → no-op plan (with "
             "refresh) → destroy.")
    L.append("- Peak RSS: the maximum over time of the summed VmRSS of the command and all its "
             "descendants (provider plugins, Nix evaluators), polled every 20 ms.")
    L.append(f"- Background load: {background_load(bench)}; load average at start {meta['load_start']}, "
             f"at end {meta['load_end']}."
             + (f" With --wait-idle {a.wait_idle:g}, {bench.busy_starts} step(s) still started on a busy "
                "machine." if a.wait_idle > 0 else ""))
    L.append("")

    targets = evaluate_targets(bench, workloads)
    L.append("## Targets (issue 6)")
    L.append("")
    L.append("| target | measured | |")
    L.append("|---|---|---|")
    for name, measured, ok in targets:
        L.append(f"| {name} | {measured} | {'met' if ok is True else 'missed' if ok is False else 'not measured'} |")
    L.append("")

    for w in workloads:
        L.extend(render_workload(bench, w))

    if bench.notes:
        L.append("## Notes")
        L.append("")
        for n in bench.notes:
            L.append(f"- {n}")
        L.append("")
    L.append("## Anomalies")
    L.append("")
    if bench.anomalies:
        for x in bench.anomalies:
            L.append(f"- {x}")
    else:
        L.append("None: every step of every repetition exited 0 and did what it should "
                 "(creates, no changes, deletes all counted).")
    L.append("")
    return "\n".join(L)


def background_load(bench: Bench) -> str:
    """How busy the machine was with other work while steps were measured."""
    shares, total_wall, total_foreign = [], 0.0, 0.0
    for engines in bench.results.values():
        for steps in engines.values():
            for runs in steps.values():
                for r in runs:
                    if r["wall"] > 0:
                        shares.append(r["foreign_cpu"] / r["wall"])
                        total_wall += r["wall"]
                        total_foreign += r["foreign_cpu"]
    if not shares:
        return "not measured"
    return (f"processes outside the benchmark kept {total_foreign / total_wall:.2f} of "
            f"{os.cpu_count()} CPUs busy on average during the measured steps (per step: median "
            f"{statistics.median(shares):.2f}, max {max(shares):.2f})")


def loadavg() -> str:
    try:
        return " / ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def render_workload(bench: Bench, w: Workload) -> list[str]:
    L = [f"## {w.title}", ""]
    res = bench.results.get(w.key, {})
    nreps = len(res.get("nivis", {}).get("apply", []))
    treps = len(res.get("terraform", {}).get("apply", []))
    L.append(f"Repetitions: Nivis {nreps}, Terraform {treps if treps else 'not run'}."
             + (f" {w.skip_note}" if w.skip_note else ""))
    L.append("")
    med = bench.median

    def cpu_total(engine, step):
        runs = res.get(engine, {}).get(step, [])
        return statistics.median(sum(r["cpu_by_cat"].values()) for r in runs) if runs else None

    L.append("| step | Terraform wall | Nivis wall | ratio | Terraform peak RSS | Nivis peak RSS | ratio "
             "| Terraform CPU | Nivis CPU |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for step in STEPS:
        tw, nw = med(w.key, "terraform", step, "wall"), med(w.key, "nivis", step, "wall")
        tr, nr = med(w.key, "terraform", step, "peak_rss"), med(w.key, "nivis", step, "peak_rss")
        tc, nc = cpu_total("terraform", step), cpu_total("nivis", step)
        if tw is None and step in w.tf_estimate:
            tw_s, ratio = f"≈ {fmt_s(w.tf_estimate[step])} (est.)", f"≈ {fmt_ratio(nw, w.tf_estimate[step])}"
        else:
            tw_s, ratio = fmt_s(tw), fmt_ratio(nw, tw)
        L.append(f"| {STEP_LABEL[step]} | {tw_s} | {fmt_s(nw)} | {ratio} | "
                 f"{fmt_mb(tr)} | {fmt_mb(nr)} | {fmt_ratio(nr, tr)} | {fmt_s(tc)} | {fmt_s(nc)} |")
    L.append("")
    L.append("Nivis time split (medians; method in bench/README.md), from the `timing` event Nivis "
             "emits last. *Nix* = Σ `evaluated` seconds. *Providers* = wall time with at least one provider "
             "call, start-up or shutdown in flight (client-side gRPC work included); *calls* = RPCs made; "
             "*Σ/par* = the calls' durations added up, / parallelism. *Own* = wall − Nix − providers: time "
             "when Nivis waited on neither (process start, reading the IR, scheduling, state, rendering, "
             "exit); *own, max* = wall − Nix − start-up − Σ/par (what would remain if the calls had kept "
             "every worker busy: an upper bound).")
    L.append("")
    L.append("| step | wall | Nix (evaluations) | providers | calls | Σ/par | own | own % | own, max | "
             "CPU s: nivis / nix / provider |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for step in STEPS:
        runs = res.get("nivis", {}).get(step, [])
        if not runs:
            continue
        wall = med(w.key, "nivis", step, "wall")
        nix = med(w.key, "nivis", step, "nix")
        prov = med(w.key, "nivis", step, "provider")
        own = med(w.key, "nivis", step, "own")
        own_max = med(w.key, "nivis", step, "own_max")
        sfp = med(w.key, "nivis", step, "sum_calls_over_par")
        calls = statistics.median([r["calls"] for r in runs])
        evals = statistics.median([r["evaluations"] for r in runs])
        cpu = [statistics.median([r["cpu_by_cat"].get(c, 0.0) for r in runs]) for c in ("nivis", "nix", "provider")]
        L.append(f"| {STEP_LABEL[step]} | {fmt_s(wall)} | {fmt_s(nix)} ({evals:g}) | {fmt_s(prov)} | {calls:g} | "
                 f"{fmt_s(sfp)} | {fmt_s(own)} | {100 * own / wall:.0f}% | "
                 f"{fmt_s(own_max)} ({100 * own_max / wall:.0f}%) | "
                 f"{cpu[0]:.2f} / {cpu[1]:.2f} / {cpu[2]:.2f} |")
    L.append("")
    L += rss_split(res.get("nivis", {}))
    applies = res.get("nivis", {}).get("apply", [])
    if applies:
        phases = sorted({r["apply_phases"] for r in applies if r["apply_phases"] is not None})
        L.append(f"Nivis apply: {', '.join(map(str, phases)) or '?'} apply phase(s), "
                 f"{statistics.median([r['evaluations'] for r in applies]):g} Nix evaluation(s).")
        if w.kind == "phased" or max((r["evaluations"] for r in applies), default=0) > 2:
            per = per_phase_medians(applies)
            L.append("")
            L.append("Nix time per evaluation during apply (median over repetitions):")
            L.append("")
            L.append("| evaluation (phase) | " + " | ".join(str(p) for p, _ in per) + " |")
            L.append("|---|" + "---|" * len(per))
            L.append("| Nix seconds | " + " | ".join(f"{s:.3f}" for _, s in per) + " |")
        L.append("")
    return L


def rss_split(nivis: dict) -> list[str]:
    """The Nivis peak RSS split by process: per kind, the median over repetitions of the
    largest single process's own peak (VmHWM) and how many such processes ran, beside the
    tree's peak (the sum of every process alive at once)."""
    if not any(nivis.get(step) for step in STEPS):
        return []
    L = ["Nivis peak RSS by process (medians): each kind's largest single process (its own "
         "high-water mark, VmHWM) and, in brackets, how many processes of that kind ran; the tree "
         "column is the peak of the sum over all processes alive at once.", "",
         "| step | nivis | largest Nix evaluator | largest provider | tree |", "|---|---|---|---|---|"]
    for step in STEPS:
        runs = nivis.get(step, [])
        if not runs:
            continue
        cells = []
        for cat in ("nivis", "nix", "provider"):
            seen = [r.get("largest_by_cat", {}).get(cat) for r in runs]
            seen = [x for x in seen if x]
            if not seen:
                cells.append("—")
                continue
            mb = statistics.median(x[0] for x in seen)
            count = statistics.median(x[1] for x in seen)
            cells.append(f"{fmt_mb(mb)} ({count:g})")
        tree = statistics.median(r["peak_rss"] for r in runs)
        L.append(f"| {STEP_LABEL[step]} | {' | '.join(cells)} | {fmt_mb(tree)} |")
    L.append("")
    return L


def per_phase_medians(runs: list[dict]) -> list[tuple]:
    n = min(len(r["per_phase_nix"]) for r in runs)
    out = []
    for i in range(n):
        out.append((runs[0]["per_phase_nix"][i][0], statistics.median(r["per_phase_nix"][i][1] for r in runs)))
    return out


def evaluate_targets(bench: Bench, workloads: list[Workload]) -> list[tuple]:
    med = bench.median
    keys = {w.key for w in workloads}
    out = []

    def ratio_target(name, step, limit):
        k = "n1000"
        if k not in keys:
            out.append((name, "workload not run", None))
            return
        n, t = med(k, "nivis", step, "wall"), med(k, "terraform", step, "wall")
        if n is None or t is None:
            out.append((name, "not measured", None))
            return
        r = n / t
        out.append((name, f"{r:.3f} ({fmt_s(n)} vs {fmt_s(t)})", r <= limit))

    ratio_target("apply, 1000 independent: Nivis/TF ≤ 0.10", "apply", 0.10)
    ratio_target("destroy, 1000: ≤ 0.10", "destroy", 0.10)
    ratio_target("plan (fresh), 1000: ≤ 0.5", "plan", 0.5)
    ratio_target("no-op plan with refresh, 1000: ≤ 0.5", "noop-plan", 0.5)

    worst = None
    for w in workloads:
        for step in STEPS:
            n, t = med(w.key, "nivis", step, "peak_rss"), med(w.key, "terraform", step, "peak_rss")
            if n is None or t is None:
                continue
            r = n / t
            if worst is None or r > worst[0]:
                worst = (r, w.key, step)
    if worst:
        out.append(("peak RSS, every step: ≤ 0.5", f"worst {worst[0]:.2f} ({worst[1]}, {STEP_LABEL[worst[2]]})",
                    worst[0] <= 0.5))
    else:
        out.append(("peak RSS, every step: ≤ 0.5", "not measured", None))

    a1, a10 = med("n1000", "nivis", "apply", "wall"), med("n10000", "nivis", "apply", "wall")
    if a1 and a10:
        out.append(("scaling: Nivis apply 10000 ≤ 12 × apply 1000", f"{a10 / a1:.1f}× ({fmt_s(a10)} vs {fmt_s(a1)})",
                    a10 / a1 <= 12))
    else:
        out.append(("scaling: Nivis apply 10000 ≤ 12 × apply 1000", "not measured", None))

    if "n1000" in keys:
        evals = [s for step in STEPS for r in bench.results.get("n1000", {}).get("nivis", {}).get(step, [])
                 for s in r["nix_per_eval"]]
        if evals:
            out.append(("per-phase Nix re-evaluation of the 1000-resource plan < 1 s",
                        f"max {max(evals):.2f} s, median {statistics.median(evals):.2f} s over {len(evals)} evaluations",
                        max(evals) < 1.0))
        shares = []
        for step in STEPS:
            own, wall = med("n1000", "nivis", step, "own"), med("n1000", "nivis", step, "wall")
            if own is not None and wall:
                shares.append((own / wall, step))
        if shares:
            worst = max(shares)
            out.append(("executor's own overhead < 20 % of wall (1000 independent, every step; the *own* "
                        "column, i.e. the lower bound)",
                        ", ".join(f"{STEP_LABEL[s]} {100 * x:.0f}%" for x, s in shares), worst[0] < 0.20))
    else:
        out.append(("per-phase Nix re-evaluation of the 1000-resource plan < 1 s", "workload not run", None))
        out.append(("executor's own overhead < 20 % of wall", "workload not run", None))
    return out


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


HAND_WRITTEN = "<!-- Written by hand below this line: bench/run.py keeps it; redo it after each run. -->"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="repetitions per workload (default 3)")
    ap.add_argument("--reps-large", type=int, default=None,
                    help="repetitions for independent sizes above 1000 (default: --reps)")
    ap.add_argument("--reps-huge", type=int, default=1,
                    help="repetitions for independent sizes above 10000 (default 1)")
    ap.add_argument("--sizes", default="100,1000,10000,100000",
                    help="independent workload sizes (default 100,1000,10000,100000; Terraform is "
                    "estimated, not run, where it would exceed --terraform-limit)")
    ap.add_argument("--chain", type=int, default=100, help="length of the dependency chain (0 to skip; default 100)")
    ap.add_argument("--hops", type=int, default=5, help="hops of the phased two-provider chain (0 to skip; default 5)")
    ap.add_argument("--parallelism", type=int, default=10)
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="before each step, wait up to SECONDS for other processes to leave the CPUs "
                    "idle (under 0.25 CPUs busy over 1 s); for shared machines (default 0: do not wait)")
    ap.add_argument("--terraform-limit", type=float, default=600.0,
                    help="skip Terraform for a size above 1000 whose estimated repetition (all four steps) "
                    "exceeds this many seconds (default 600)")
    ap.add_argument("--nivis", default=None,
                    help="the nivis binary (default: $NIVIS_BIN, $CARGO_TARGET_DIR/release/nivis, target/release/nivis)")
    ap.add_argument("--workdir", default=None, help="where workloads run (default: a new directory under /tmp)")
    ap.add_argument("--out", default=None, help="the Markdown report (default docs/benchmarks.md; with --quick, "
                    "<workdir>/benchmarks.md)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 repetition, sizes 10,100, chain 10; report outside docs/")
    args = ap.parse_args()
    if args.quick:
        args.reps = 1
        if args.sizes == ap.get_default("sizes"):
            args.sizes = "10,100"
        if args.chain == ap.get_default("chain"):
            args.chain = 10
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    if args.nivis is None:
        cands = [os.environ.get("NIVIS_BIN")]
        if os.environ.get("CARGO_TARGET_DIR"):
            cands.append(os.path.join(os.environ["CARGO_TARGET_DIR"], "release", "nivis"))
        cands += [str(REPO / "target/release/nivis"), "/work/cargo-target/release/nivis"]
        args.nivis = next((c for c in cands if c and os.access(c, os.X_OK)), None)
        if args.nivis is None:
            ap.error("no nivis binary found; build it (cargo build --release --bins) or pass --nivis")
    if not os.access(args.nivis, os.X_OK):
        ap.error(f"{args.nivis} is not an executable")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="nivis-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else (work / "benchmarks.md" if args.quick else REPO / "docs/benchmarks.md")

    command = "python3 bench/run.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    started = time.time()
    load_start = loadavg()
    log(f"work directory {work}")
    env = Env(args, work)
    bench = Bench(args, env)

    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    workloads: list[Workload] = []
    for n in sizes:
        reps = args.reps if n <= 1000 or args.reps_large is None else args.reps_large
        if n > 10000:
            reps = min(reps, args.reps_huge)
        workloads.append(Workload(f"n{n}", f"{n} independent null_resources", "independent", n, reps, True))
    if args.chain > 0:
        workloads.append(Workload(f"chain{args.chain}", f"Chain of {args.chain} null_resources (each references "
                                  "the previous one's id)", "chain", args.chain, args.reps, True))
    if args.hops > 0:
        workloads.append(Workload("phased", f"Phased two-provider example: a {args.hops}-hop Nix-mediated chain "
                                  "(fake providers alpha/beta, Nivis only)", "phased", args.hops + 1, args.reps,
                                  False, "Terraform cannot express a value computed in Nix from an apply-time "
                                  "output, so there is no Terraform column."))

    for w in workloads:
        if w.kind == "independent" and w.n > 1000:
            est, how = estimate_terraform(bench, w.n)
            cycle = sum(est.values())
            if cycle > args.terraform_limit:
                w.terraform = False
                w.tf_estimate = est
                w.skip_note = (
                    f"Terraform skipped: one repetition would take about {cycle / 60:.0f} min "
                    f"(estimated: {', '.join(f'{STEP_LABEL[k]} ≈ {fmt_s(v)}' for k, v in est.items())}; "
                    f"{how}), over the {args.terraform_limit:.0f} s limit. The Terraform column "
                    "below shows these estimates, marked ≈; they are not measurements.")
                log(w.skip_note)
        bench.run_workload(w)
        if w.kind == "independent" and w.n > 1000 and not w.terraform:
            bench.notes.append(f"{w.title}: {w.skip_note}")

    finished = time.time()
    meta = {
        "started": _dt.datetime.fromtimestamp(started).strftime("%Y-%m-%d %H:%M:%S"),
        "finished": _dt.datetime.fromtimestamp(finished).strftime("%Y-%m-%d %H:%M:%S"),
        "duration": finished - started,
        "command": command,
        "machine": machine_info(),
        "versions": tool_versions(env),
        "workdir": str(work),
        "load_start": load_start,
        "load_end": loadavg(),
    }
    report = render(bench, workloads, meta)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Sections written by hand (findings, other benchmarks) follow HAND_WRITTEN in the report and
    # are carried over, so a re-run does not lose them; they must be re-read after each run.
    if out.exists() and HAND_WRITTEN in out.read_text():
        report = report.rstrip("\n") + "\n\n" + HAND_WRITTEN + out.read_text().split(HAND_WRITTEN, 1)[1]
    out.write_text(report)
    raw = work / "results.json"
    raw.write_text(json.dumps({"meta": meta, "results": bench.results, "anomalies": bench.anomalies}, indent=1,
                              default=str))
    print(report)
    log(f"report written to {out}; raw results in {raw}")
    return 1 if bench.anomalies else 0


def estimate_terraform(bench: Bench, n: int) -> tuple[dict, str]:
    """Estimates Terraform's wall time per step at size n from the independent workloads measured
    so far. With two sizes m1 < m2, fits t = c + a·m + b·m² (a, b ≥ 0), c being Terraform's fixed
    start-up cost (the fastest step measured): Terraform rewrites its whole state after every
    resource, so apply and destroy grow with the square of the count. With one size, scales it by
    (n/m)². With none, uses the reference figures for 1000 (plan 2.5 s, apply 35 s, no-op plan
    3.6 s, destroy 35 s) scaled by (n/1000)²."""
    measured = []
    for key, engines in bench.results.items():
        if key.startswith("n") and key[1:].isdigit() and engines.get("terraform", {}).get("apply"):
            measured.append(int(key[1:]))
    measured.sort()
    est = {}
    if not measured:
        ref = {"plan": 2.5, "apply": 35.0, "noop-plan": 3.6, "destroy": 35.0}
        return ({k: v * (n / 1000) ** 2 for k, v in ref.items()},
                "reference figures for 1000 (docs/shared real-providers.md) scaled by (N/1000)²")
    if len(measured) == 1:
        m = measured[0]
        for step in STEPS:
            t = bench.median(f"n{m}", "terraform", step, "wall")
            est[step] = t * (n / m) ** 2
        return est, f"this run's Terraform times for {m} scaled by (N/{m})²"
    m1, m2 = measured[-2], measured[-1]
    c = min(bench.median(f"n{m}", "terraform", step, "wall") for m in measured for step in STEPS)
    for step in STEPS:
        t1 = max(0.0, bench.median(f"n{m1}", "terraform", step, "wall") - c)
        t2 = max(0.0, bench.median(f"n{m2}", "terraform", step, "wall") - c)
        b = (t2 / m2 - t1 / m1) / (m2 - m1)
        a = t1 / m1 - b * m1
        if b < 0:  # no superlinear part: linear through the larger point
            a, b = t2 / m2, 0.0
        elif a < 0:  # purely quadratic
            a, b = 0.0, t2 / m2 ** 2
        est[step] = c + a * n + b * n * n
    return est, (f"t = {c:.2f} s + a·N + b·N² fitted per step to this run's Terraform medians at "
                 f"{m1} and {m2}")


if __name__ == "__main__":
    sys.exit(main())

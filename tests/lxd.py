#!/usr/bin/env python3
"""Start and stop a real LXD daemon (Debian 12's `lxd` 5.0.2) for the real-LXD tests, the
LXD tutorial test and the LXD benchmark, with nothing able to leave the machine.

The daemon runs by hand (no systemd) inside a network namespace and a mount namespace of its
own (`unshare --net --mount`): the network namespace has only loopback, so LXD cannot resolve
its image server or reach anything else even by accident; the private mount namespace keeps
every mount the daemon and its containers make (shmounts, devlxd, container root file
systems) away from the host, so a killed daemon leaves no mount behind. The Nivis process,
`lxc` and the provider stay in the root namespaces and reach the daemon through its unix
socket, which is a file in DIR and works across network namespaces.

The daemon is initialised offline: a `dir` storage pool named `default`, a default profile
with only a root disk, proxies pointed at a dead local port and image auto-update off. A
busybox image is built locally from Debian's busybox-static (a `rootfs/` with `/bin/busybox`,
its applet links and an `/sbin/init` that sleeps until LXD asks it to stop, plus
`metadata.yaml`) and imported under the alias `busybox`. The tarball is deterministic, so the
image has the same fingerprint on every run.

Usage:
    python3 tests/lxd.py start --dir DIR
    python3 tests/lxd.py stop --dir DIR

`start` prints one JSON line: {"socket", "lxdDir", "pid", "image", "dir"}. `lxc` talks to
this daemon with `LXD_DIR=<lxdDir>` in its environment; the provider with a `lxd_remote` of
scheme `unix` whose address is the socket. The daemon runs in its own session (it outlives
this script) until `stop`, which shuts it down (containers included), kills what is left of
its process group and removes DIR's daemon files. Keep DIR short: a unix socket path has at
most 107 bytes.

Standard library only; importable (start(), stop()) by bench scripts.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

READY_TIMEOUT_S = 60.0
IMAGE_ALIAS = "busybox"
BUSYBOX = Path("/bin/busybox")
# A fixed time for every tar entry and the metadata: the same image bytes on every run.
IMAGE_EPOCH = 1_700_000_000
# Where HTTP(S) would go if LXD ever tried: a local port nothing listens on (the discard port).
DEAD_PROXY = "http://127.0.0.1:9"

PRESEED = f"""\
config:
  core.proxy_http: {DEAD_PROXY}
  core.proxy_https: {DEAD_PROXY}
  images.auto_update_interval: "0"
  images.remote_cache_expiry: "0"
storage_pools:
- name: default
  driver: dir
profiles:
- name: default
  devices:
    root:
      path: /
      pool: default
      type: disk
"""

# PID 1 of the busybox containers: sleeps in short steps so that LXD's stop signal (SIGPWR)
# ends it at once instead of after LXD's stop timeout.
INIT = b"""#!/bin/sh
trap 'exit 0' PWR TERM INT
while :; do sleep 1; done
"""

MISSING = ("the real-LXD tests need Debian's lxd, lxd-client and busybox-static packages "
           "(`bash scripts/install.sh` installs them, or `apt-get install lxd lxd-client "
           "busybox-static`)")


class HarnessError(Exception):
    pass


def log(msg: str) -> None:
    print(f"lxd: {msg}", file=sys.stderr, flush=True)


def tool(name: str) -> str:
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise HarnessError(f"`{name}` not found: {MISSING}")


def paths(root: Path) -> dict[str, Path]:
    return {"lxd": root / "lxd", "pid": root / "lxd.pid", "log": root / "lxd.log",
            "image": root / "busybox.tar.gz"}


def lxc(lxd_dir: Path, *args: str, stdin: str | None = None) -> str:
    env = dict(os.environ, LXD_DIR=str(lxd_dir))
    out = subprocess.run([tool("lxc"), *args], input=stdin, text=True, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=None if stdin is not None else subprocess.DEVNULL)
    if out.returncode != 0:
        raise HarnessError(f"lxc {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def build_image(dest: Path) -> None:
    """A unified LXD image tarball: metadata.yaml and rootfs/ with busybox and its applets."""
    if not BUSYBOX.is_file():
        raise HarnessError(f"{BUSYBOX} is missing: {MISSING}")
    applets = subprocess.run([str(BUSYBOX), "--list-full"], stdout=subprocess.PIPE, text=True,
                             check=True).stdout.split()
    metadata = (f"architecture: x86_64\ncreation_date: {IMAGE_EPOCH}\n"
                "properties:\n  description: busybox (Debian busybox-static, built by tests/lxd.py)\n"
                "  os: busybox\n  release: local\n").encode()

    def entry(name: str, kind: bytes, mode: int, data: bytes = b"", link: str = "") -> None:
        ti = tarfile.TarInfo(name)
        ti.type, ti.mode, ti.mtime, ti.uid, ti.gid = kind, mode, IMAGE_EPOCH, 0, 0
        ti.linkname = link
        ti.size = len(data) if kind == tarfile.REGTYPE else 0
        tar.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

    dirs = {"rootfs", "rootfs/bin", "rootfs/sbin", "rootfs/usr", "rootfs/usr/bin",
            "rootfs/usr/sbin", "rootfs/dev", "rootfs/proc", "rootfs/sys", "rootfs/tmp",
            "rootfs/etc", "rootfs/root", "rootfs/run", "rootfs/var", "rootfs/mnt"}
    tmp = dest.with_suffix(".partial")
    with tarfile.open(tmp, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        entry("metadata.yaml", tarfile.REGTYPE, 0o644, metadata)
        for d in sorted(dirs):
            entry(d, tarfile.DIRTYPE, 0o1777 if d == "rootfs/tmp" else 0o755)
        entry("rootfs/bin/busybox", tarfile.REGTYPE, 0o755, BUSYBOX.read_bytes())
        entry("rootfs/etc/passwd", tarfile.REGTYPE, 0o644, b"root:x:0:0:root:/root:/bin/sh\n")
        entry("rootfs/etc/group", tarfile.REGTYPE, 0o644, b"root:x:0:\n")
        for full in sorted(set(applets)):
            rel = full.lstrip("/")
            if rel in ("bin/busybox", "sbin/init") or rel.split("/")[0] not in ("bin", "sbin", "usr"):
                continue
            entry(f"rootfs/{rel}", tarfile.SYMTYPE, 0o777, link="/bin/busybox")
        entry("rootfs/sbin/init", tarfile.REGTYPE, 0o755, INIT)
    os.replace(tmp, dest)


def start(root: Path) -> dict:
    """Starts a daemon keeping everything under `root`; returns what `start` prints."""
    root = root.resolve()
    p = paths(root)
    sock = p["lxd"] / "unix.socket"
    if len(str(sock).encode()) > 107:
        raise HarnessError(f"{sock} is longer than a unix socket path may be; use a shorter --dir")
    if p["pid"].exists():
        raise HarnessError(f"{p['pid']} exists: is a daemon still running for {root}? "
                           f"(`python3 tests/lxd.py stop --dir {root}`)")
    p["lxd"].mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    os.chmod(p["lxd"], 0o711)
    # The containers' root users (uid 100000 and up) must be able to walk down to their root
    # file systems under DIR.
    for d in root.parents:
        if not os.stat(d).st_mode & 0o001:
            raise HarnessError(f"{d} is not searchable by other users, so the containers cannot "
                               f"reach their files under {root}: chmod o+x {d}, or use another --dir")
    lxd, unshare, ip = tool("lxd"), tool("unshare"), tool("ip")
    tool("lxc")
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["LXD_DIR"] = str(p["lxd"])
    # Inside the namespaces: loopback up; then a sysfs of the new network namespace over /sys
    # (the inherited one lists the host's interfaces, so LXD would not find the bridges it
    # makes), with the host's cgroup hierarchies bound back into it.
    sysfs = root / "sysfs"
    sysfs.mkdir(exist_ok=True)
    script = (f'"{ip}" link set lo up && mount -t sysfs sysfs "{sysfs}" '
              f'&& mount --rbind /sys/fs/cgroup "{sysfs}/fs/cgroup" && mount --move "{sysfs}" /sys '
              f'&& exec "{lxd}" --group root --logfile "{p["log"]}"')
    logf = open(root / "lxd.out", "ab")
    proc = subprocess.Popen([unshare, "--net", "--mount", "--propagation", "private", "--fork",
                             "sh", "-c", script],
                            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                            start_new_session=True, env=env)
    p["pid"].write_text(f"{proc.pid}\n")
    try:
        wait_ready(proc, p, root)
        lxc(p["lxd"], "query", "--wait", "-X", "GET", "/1.0")
        init = subprocess.run([lxd, "init", "--preseed"], input=PRESEED, text=True, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if init.returncode != 0:
            raise HarnessError(f"lxd init --preseed failed: {init.stdout.strip()}")
        build_image(p["image"])
        lxc(p["lxd"], "image", "import", str(p["image"]), "--alias", IMAGE_ALIAS)
    except BaseException:
        stop(root)
        raise
    return {"socket": str(sock), "lxdDir": str(p["lxd"]), "pid": proc.pid,
            "image": IMAGE_ALIAS, "dir": str(root)}


def wait_ready(proc: subprocess.Popen, p: dict[str, Path], root: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    env = dict(os.environ, LXD_DIR=str(p["lxd"]))
    while True:
        if proc.poll() is not None:
            raise HarnessError(f"lxd exited with {proc.returncode}; see {p['log']} and {root / 'lxd.out'}")
        left = deadline - time.monotonic()
        if left <= 0:
            raise HarnessError(f"lxd was not ready within {READY_TIMEOUT_S}s; see {p['log']}")
        ready = subprocess.run([tool("lxd"), "waitready", "--timeout", "1"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if ready.returncode == 0:
            return


def stop(root: Path) -> None:
    """Stops the daemon started for `root`: `lxd shutdown` (which stops its containers), then
    SIGKILL to whatever is left of its process group; removes the daemon's files."""
    root = root.resolve()
    p = paths(root)
    try:
        pid = int(p["pid"].read_text())
    except (OSError, ValueError):
        return
    env = dict(os.environ, LXD_DIR=str(p["lxd"]))
    if alive(pid):
        try:
            subprocess.run([tool("lxd"), "shutdown", "--timeout", "20"], env=env, timeout=40,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, HarnessError):
            pass
    # The daemon's forks (forkstart, the containers' monitors and their processes) stay in its
    # process group unless a container made a session of its own: kill by group, then by the
    # namespace's processes.
    ns = namespace_of(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    kill_namespace_members(ns)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    p["pid"].unlink(missing_ok=True)
    # The mounts lived in the daemon's mount namespace and went with it; the files stay in
    # DIR, which the caller owns (a temporary directory), except the image we built.
    p["image"].unlink(missing_ok=True)


def alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def namespace_of(pid: int) -> str | None:
    """The network namespace `unshare` made (`unshare --fork` enters it itself), or None when it
    is gone or is the host's."""
    try:
        ns = os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return None if ns == os.readlink("/proc/self/ns/net") else ns


def kill_namespace_members(ns: str | None) -> None:
    """SIGKILL every process left in the daemon's network namespace (a container's processes
    that made a session of their own), found by their /proc/PID/ns/net link."""
    if ns is None:
        return
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "net") == ns:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start")
    s.add_argument("--dir", required=True, type=Path)
    t = sub.add_parser("stop")
    t.add_argument("--dir", required=True, type=Path)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "start":
            print(json.dumps(start(args.dir)), flush=True)
        else:
            stop(args.dir)
    except HarnessError as e:
        print(f"lxd: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

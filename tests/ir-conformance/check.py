#!/usr/bin/env python3
"""Conformance checker for the Nivis IR (schemaVersion 1).

Usage:
    check.py validate FILE...   validate IR documents; prints "ok" or one error per line
    check.py test               run every fixture under fixtures/valid and fixtures/invalid

Validation has two layers, run in order:
  1. structure: docs/ir-schema.json (JSON Schema 2020-12), which dispatches every
     leaf marker (__ref, __sensitiveRef, __derived, __build, __sensitive, __ephemeral) to its own
     subschema;
  2. references: the rules a schema cannot express (ids match their parts and are
     unique, providers are declared, no data source uses a nixops4 provider, every
     referenced id exists, every reference in a node's config has an edge, consumer
     ids are unique, variable defaults match their type, no __build inside a
     __sensitive value). They run only on a structurally valid document.

Each error line names the element and the attribute path inside it, for example
    resources[1] (alpha.alpha_token.B): config.label.__ref: 'path' is a required property

This script is the reference behaviour: src/ir.rs must accept and reject the same
documents (tests/ir_fixtures.rs checks that they agree).
"""
import json
import re
import sys
from pathlib import Path

import jsonschema
from jsonschema import Draft202012Validator, validators

HERE = Path(__file__).resolve().parent
SCHEMA_PATH = HERE.parent.parent / "docs" / "ir-schema.json"
FIXTURES = HERE / "fixtures"
EXPECT_KEY = "//expect"
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")

_pattern_cache = {}


def _ecma_pattern(validator, pattern, instance, schema):
    """JSON Schema patterns follow ECMA-262, where '$' only matches at the very end.
    Python's '$' also matches before a trailing newline, so translate it to '\\Z'."""
    if not validator.is_type(instance, "string"):
        return
    compiled = _pattern_cache.get(pattern)
    if compiled is None:
        source = pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith(r"\$") else pattern
        compiled = _pattern_cache[pattern] = re.compile(source)
    if not compiled.search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


IrValidator = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})


def load_schema():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    Draft202012Validator.check_schema(schema)
    return schema


# --- rendering locations ------------------------------------------------------

def quote_key(key):
    """A JSON string literal, escaped the way Nix's builtins.toJSON does it."""
    out = ['"']
    for ch in key:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def render_path(steps):
    """Render attribute path steps as a.b[0]["k.x"]."""
    out = []
    for i, step in enumerate(steps):
        if isinstance(step, int):
            out.append(f"[{step}]")
        elif IDENT.match(step):
            out.append(step if i == 0 else "." + step)
        else:
            out.append(f"[{quote_key(step)}]")
    return "".join(out)


def element_label(doc, section, index):
    """resources[1] (alpha.alpha_token.B), edges[0] (a -> b), ..."""
    label = f"{section}[{index}]"
    try:
        item = doc[section][index]
    except (KeyError, IndexError, TypeError):
        return label
    if not isinstance(item, dict):
        return label
    if section == "removed" and isinstance(item.get("from"), str):
        return f"{label} ({item['from']})"
    if section in ("edges", "moved"):
        if isinstance(item.get("from"), str) and isinstance(item.get("to"), str):
            return f"{label} ({item['from']} -> {item['to']})"
        return label
    if isinstance(item.get("id"), str):
        return f"{label} ({item['id']})"
    return label


def locate(doc, path):
    """Split a JSON path into the element it belongs to and the path inside it."""
    path = list(path)
    if not path:
        return "ir"
    head = path[0]
    if head in ("resources", "data", "ephemeral", "edges", "nixConsumers", "moved", "conditions", "removed") and len(path) > 1 and isinstance(path[1], int):
        element, rest = element_label(doc, head, path[1]), path[2:]
    elif head in ("providers", "variables") and len(path) > 1:
        element, rest = render_path(path[:2]), path[2:]
    else:
        element, rest = render_path(path[:1]), path[1:]
    return f"{element}: {render_path(rest)}" if rest else element


# --- layer 1: structure -------------------------------------------------------

def schema_errors(doc, schema):
    errors = []
    for err in IrValidator(schema).iter_errors(doc):
        message = err.message
        if isinstance(err.schema, dict) and "errorMessage" in err.schema:
            message = err.schema["errorMessage"]
        errors.append((list(err.absolute_path), f"{locate(doc, err.absolute_path)}: {message}"))
    errors.sort(key=lambda e: (json.dumps(e[0]), e[1]))
    return [line for _, line in errors]


# --- layer 2: references ------------------------------------------------------

MARKERS = ("__ref", "__sensitiveRef", "__derived", "__build", "__sensitive", "__ephemeral")
BUILD_IN_SENSITIVE = ("__build inside __sensitive: a build output computed from a secret would put "
                      "the secret in the world-readable Nix store")


def walk_references(tree, path, out, inside_sensitive=False):
    """Collect (path, marker, payload) for every reference leaf in a tree, and
    (path, "__build", None) for every build output inside a __sensitive value (whose
    inside is walked in place: it has the path of the marker)."""
    if isinstance(tree, list):
        for i, item in enumerate(tree):
            walk_references(item, path + [i], out, inside_sensitive)
    elif isinstance(tree, dict):
        marker = next((m for m in MARKERS if m in tree), None)
        if marker is None:
            for key, value in tree.items():
                walk_references(value, path + [key], out, inside_sensitive)
        elif marker in ("__sensitive", "__ephemeral"):
            walk_references(tree[marker]["value"], path, out, True)
        elif marker == "__build":
            if inside_sensitive:
                out.append((path, marker, None))
        else:
            out.append((path, marker, tree[marker]))


def resolve_input(text, ids):
    """Split '<id>.<attr>' at the longest declared id; None when nothing matches."""
    pos = len(text)
    while True:
        pos = text.rfind(".", 0, pos)
        if pos <= 0:
            return None
        if text[:pos] in ids and pos + 1 < len(text):
            return text[:pos]


def type_matches(ty, value):
    if value is None or ty is None or ty == "any":
        return True
    if ty == "string":
        return isinstance(value, str)
    if ty == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ty == "bool":
        return isinstance(value, bool)
    if ty == "list":
        return isinstance(value, list)
    if ty == "map":
        return isinstance(value, dict)
    return False


def reference_errors(doc):
    errors = []
    providers = doc["providers"]
    nodes = [("resources", i, n) for i, n in enumerate(doc["resources"])]
    nodes += [("data", i, n) for i, n in enumerate(doc.get("data", []))]

    ids = {}
    for section, i, node in nodes:
        where = element_label(doc, section, i)
        prefix = "data." if section == "data" else ""
        module = f"{node['module']}." if "module" in node else ""
        expected = f"{prefix}{module}{node['provider']}.{node['type']}.{node['name']}"
        if node["id"] != expected:
            errors.append(f"{where}: id: '{node['id']}' does not match its parts (expected '{expected}')")
        if "key" in node:
            text = str(node["key"])
            block = node["name"][: -len(text)] if node["name"].endswith(text) else ""
            if not block.endswith("__") or block == "__":
                errors.append(f"{where}: key: '{text}' does not end the name '{node['name']}' "
                              "(an instance is named <block>__<key>)")
        if node["id"] in ids:
            errors.append(f"{where}: id: duplicate id '{node['id']}' (first declared at {ids[node['id']]})")
        else:
            ids[node["id"]] = f"{section}[{i}]"
        if node["provider"] not in providers:
            errors.append(f"{where}: provider: provider '{node['provider']}' is not declared in providers")
        elif section == "data" and providers[node["provider"]].get("kind") == "nixops4":
            errors.append(f"{where}: provider: provider '{node['provider']}' is of kind nixops4, "
                          "which has no data sources")

    ephemeral_ids = set()
    for i, node in enumerate(doc.get("ephemeral", [])):
        where = element_label(doc, "ephemeral", i)
        expected = f"ephemeral.{node['provider']}.{node['type']}.{node['name']}"
        if node["id"] != expected:
            errors.append(f"{where}: id: '{node['id']}' does not match its parts (expected '{expected}')")
        if node["id"] in ids or node["id"] in ephemeral_ids:
            first = ids.get(node["id"]) or next(
                f"ephemeral[{k}]" for k, n in enumerate(doc["ephemeral"]) if n["id"] == node["id"])
            errors.append(f"{where}: id: duplicate id '{node['id']}' (first declared at {first})")
        ephemeral_ids.add(node["id"])
        if node["provider"] not in providers:
            errors.append(f"{where}: provider: provider '{node['provider']}' is not declared in providers")
        elif providers[node["provider"]].get("kind", "tfplugin") != "tfplugin":
            errors.append(f"{where}: provider: provider '{node['provider']}' is of kind "
                          f"{providers[node['provider']]['kind']}, which has no ephemeral resources")

    def missing(target):
        return f"'{target}' is not a declared resource or data id"

    edge_pairs = set()
    for i, edge in enumerate(doc["edges"]):
        where = element_label(doc, "edges", i)
        for end in ("from", "to"):
            if edge[end] not in ids:
                errors.append(f"{where}: {end}: {missing(edge[end])}")
        edge_pairs.add((edge["from"], edge["to"]))

    def check_tree(where, tree, root, node_id):
        """Check reference targets in a tree; with node_id, also require an edge per target."""
        found = []
        walk_references(tree, list(root), found)
        for path, marker, body in found:
            at = render_path(path)
            if marker == "__build":
                errors.append(f"{where}: {at}: {BUILD_IN_SENSITIVE}")
                continue
            if marker == "__derived":
                targets = []
                for k, text in enumerate(body["inputs"]):
                    # An ephemeral result reaches a config only through Nix: no edge.
                    if resolve_input(text, ephemeral_ids | set(ids)) in ephemeral_ids:
                        continue
                    target = resolve_input(text, ids)
                    if target is None:
                        errors.append(f"{where}: {render_path(path + [marker, 'inputs', k])}: '{text}' does not "
                                      "name a declared resource or data id followed by '.<attribute>'")
                    else:
                        targets.append(target)
            elif body["resource"] in ids:
                targets = [body["resource"]]
            else:
                errors.append(f"{where}: {render_path(path + [marker, 'resource'])}: {missing(body['resource'])}")
                targets = []
            if node_id is not None:
                for target in dict.fromkeys(targets):
                    if (target, node_id) not in edge_pairs:
                        errors.append(f"{where}: {at}: refers to '{target}' but no edge goes from "
                                      f"'{target}' to '{node_id}'")

    for section, i, node in nodes:
        where = element_label(doc, section, i)
        check_tree(where, node["config"], ["config"], node["id"])
        for k, target in enumerate(node.get("meta", {}).get("dependsOn", [])):
            at = f"meta.dependsOn[{k}]"
            if target not in ids:
                errors.append(f"{where}: {at}: {missing(target)}")
            elif (target, node["id"]) not in edge_pairs:
                errors.append(f"{where}: {at}: depends on '{target}' but no edge goes from "
                              f"'{target}' to '{node['id']}'")

    managed = {n["id"] for n in doc["resources"]}
    for section, i, node in nodes:
        where = element_label(doc, section, i)
        triggers = node.get("meta", {}).get("lifecycle", {}).get("replaceTriggeredBy", [])
        for k, trigger in enumerate(triggers):
            at = f"meta.lifecycle.replaceTriggeredBy[{k}].resource"
            target = trigger["resource"]
            if target not in managed:
                errors.append(f"{where}: {at}: '{target}' is not a declared managed resource")
            elif target == node["id"]:
                errors.append(f"{where}: {at}: '{target}' is the resource itself")
            elif (target, node["id"]) not in edge_pairs:
                errors.append(f"{where}: {at}: is replaced when '{target}' changes but no edge goes "
                              f"from '{target}' to '{node['id']}'")

    for name, provider in providers.items():
        check_tree(render_path(["providers", name]), provider["config"], ["config"], None)
    for i, node in enumerate(doc.get("ephemeral", [])):
        check_tree(element_label(doc, "ephemeral", i), node["config"], ["config"], None)

    consumer_ids = {}
    for i, consumer in enumerate(doc["nixConsumers"]):
        where = element_label(doc, "nixConsumers", i)
        if consumer["id"] in consumer_ids:
            errors.append(f"{where}: id: duplicate consumer id '{consumer['id']}' "
                          f"(first declared at {consumer_ids[consumer['id']]})")
        else:
            consumer_ids[consumer["id"]] = f"nixConsumers[{i}]"
        check_tree(where, consumer["value"], ["value"], None)

    for name, decl in doc.get("variables", {}).items():
        if "default" in decl and not type_matches(decl.get("type"), decl["default"]):
            errors.append(f"{render_path(['variables', name])}: default: default does not match type '{decl['type']}'")
    errors += move_errors(doc, ids)
    errors += condition_errors(doc)
    errors += removal_errors(doc, ids)
    return errors


def removal_errors(doc, ids):
    """removed[]: from is no longer declared, and removed once."""
    errors = []
    first = {}
    for i, r in enumerate(doc.get("removed", [])):
        where = f"removed[{i}] ({r['from']})"
        if r["from"] in ids:
            errors.append(f"{where}: from: '{r['from']}' is still declared; a removal's from must be an "
                          "address that is no longer in the configuration")
        if r["from"] in first:
            errors.append(f"{where}: from: '{r['from']}' is removed twice (first at removed[{first[r['from']]}])")
        first.setdefault(r["from"], i)
    return errors


def condition_errors(doc):
    """conditions[]: a postcondition's resource is declared."""
    errors = []
    managed = {n["id"] for n in doc["resources"]}
    for i, c in enumerate(doc.get("conditions", [])):
        if c["kind"] == "postcondition" and c["resource"] not in managed:
            errors.append(f"conditions[{i}]: resource: '{c['resource']}' is not a declared resource")
    return errors


def without_module(node_id):
    """A resource id without its module instance prefix (module.<key>. pairs)."""
    parts = node_id.split(".")
    while len(parts) >= 5 and parts[0] == "module":
        parts = parts[2:]
    return ".".join(parts)


def same_provider(doc, from_kind, to):
    """Whether from_kind (PROVIDER.TYPE of a move's from) is the type of the declared resource
    `to` under another configuration of its provider (same source and kind: an alias)."""
    node = next((n for n in doc["resources"] if n["id"] == to), None)
    if node is None or not from_kind.endswith("." + node["type"]):
        return False
    providers = doc.get("providers", {})

    def decl(p):
        d = providers.get(p)
        return None if d is None else (d["source"], d.get("kind", "tfplugin"))

    from_decl = decl(from_kind[: -len("." + node["type"])])
    return from_decl is not None and from_decl == decl(node["provider"])


def move_errors(doc, ids):
    """moved[]: from no longer declared, to declared (or another move's from), same provider
    (or an alias of it) and type, each from moved once, no cycle (reported at its lowest index)."""
    errors = []
    moves = doc.get("moved", [])
    managed = {n["id"] for n in doc["resources"]}
    first_from = {}
    for i, m in enumerate(moves):
        first_from.setdefault(m["from"], i)
    kind = lambda node_id: without_module(node_id).rsplit(".", 1)[0]
    for i, m in enumerate(moves):
        where = element_label(doc, "moved", i)
        f, t = m["from"], m["to"]
        if f in ids:
            errors.append(f"{where}: from: '{f}' is still declared; a move's from must be an address "
                          "that is no longer in the configuration")
        if t not in managed and t not in first_from:
            errors.append(f"{where}: to: '{t}' is not a declared resource nor the from of another move")
        if kind(f) != kind(t) and not same_provider(doc, kind(f), t):
            errors.append(f"{where}: to: a move keeps the provider and the type: '{f}' is of "
                          f"provider.type {kind(f)}, '{t}' of {kind(t)} (two configurations of one "
                          "provider, declared with the same source, may exchange resources)")
        if first_from[f] != i:
            errors.append(f"{where}: from: '{f}' is moved twice (first at moved[{first_from[f]}])")
        path, at = [f], i
        for _ in range(len(moves)):
            path.append(moves[at]["to"])
            at = first_from.get(moves[at]["to"])
            if at is None or at < i:
                break
            if at == i:
                errors.append(f"{where}: the moves form a cycle: {' -> '.join(path)}")
                break
    return errors


# --- entry points -------------------------------------------------------------

def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_constant=_reject_constant)


def validate(doc, schema):
    """All errors for one document, structure first; [] when it conforms."""
    errors = schema_errors(doc, schema)
    if errors:
        return errors
    return reference_errors(doc)


def validate_file(path, schema):
    try:
        doc = load_json(path)
    except (OSError, ValueError, RecursionError) as e:
        return [f"ir: invalid JSON: {e}"]
    return validate(doc, schema)


def cmd_validate(files):
    schema = load_schema()
    failed = False
    for path in files:
        errors = validate_file(path, schema)
        failed = failed or bool(errors)
        prefix = f"{path}: " if len(files) > 1 else ""
        for line in errors or ["ok"]:
            print(prefix + line)
    return 1 if failed else 0


def cmd_test():
    schema = load_schema()
    passed = failed = 0

    def report(ok, name, detail=()):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"PASS {name}")
        else:
            failed += 1
            print(f"FAIL {name}")
            for line in detail:
                print(f"    {line}")

    for path in sorted((FIXTURES / "valid").glob("*.json")):
        name = f"valid/{path.name}"
        doc = load_json(path)
        if EXPECT_KEY in doc:
            report(False, name, [f"valid fixtures must not carry {EXPECT_KEY!r}"])
            continue
        errors = validate(doc, schema)
        report(not errors, name, errors)

    for path in sorted((FIXTURES / "invalid").glob("*.json")):
        name = f"invalid/{path.name}"
        doc = load_json(path)
        expect = doc.pop(EXPECT_KEY, None) if isinstance(doc, dict) else None
        if not expect or not isinstance(expect, list):
            report(False, name, [f"invalid fixtures must list the expected error text under {EXPECT_KEY!r}"])
            continue
        errors = validate(doc, schema)
        text = "\n".join(errors)
        absent = [s for s in expect if s not in text]
        if not errors:
            report(False, name, ["accepted, but it must be rejected"])
        elif absent:
            report(False, name, [f"missing expected text: {s!r}" for s in absent] + ["got:"] + errors)
        else:
            report(True, name)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "validate":
        return cmd_validate(argv[2:])
    if len(argv) == 2 and argv[1] == "test":
        return cmd_test()
    print("usage: check.py validate FILE... | check.py test", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""What a Codex release changes in the app-server protocol, against what the bridge was built from.

    scripts/codex-drift 0.171.0

Installs ``@openai/codex@VERSION`` into a temporary folder (removed afterwards), has it
generate its stable and experimental schema (``codex app-server generate-json-schema
[--experimental]``) and compares them with the copies the bridge was generated from,
``tests/schemas/codex/`` (stable) and ``tests/schemas/codex/experimental/``: only the
bundles stored there are compared. It prints, stable first, then what the experimental
surface changes beyond that: client requests, server requests, server notifications and
client notifications added or removed; then every type whose fields changed (properties
added, removed, retyped, made required or optional; enum values and union variants added
or removed), each change marked "used by the bridge" or "not used by the bridge".
Exit status 0 with or without drift (it is a report); 1 when npm or Codex fails.

How "used by the bridge" is decided, from the code, never from a list kept by hand:

* Methods. Those Codex sends that the bridge handles are the keys of the engine's
  routing table (its notification routes and the server requests it answers). Those the
  bridge sends are the string constants in ``bridge/`` source that name a client request or
  notification of either schema (``bridge/codex/methods.py``, the generated list of what
  Codex sends, is not read).
* Types. The bridge's msgspec Structs are walked side by side with the schema, from roots
  that pair a Struct with a Codex type: the params Struct each handled method decodes into
  (``bridge.codex.messages``), the result and params Structs named in a ``codex_request``
  call, and any Struct or type alias in ``bridge/codex/`` named exactly like a Codex type.
  Each field the Struct declares that the Codex type also has is a field the bridge reads
  or writes, and the walk goes on into that field's type (unions by the Struct's tag).
  A type is used when the walk reaches it, or when it is the params or response of a
  method the bridge uses (one sent or read as a plain dict or passed on raw). A change to
  a type the bridge does not use but that is reachable from one it uses is flagged so:
  the bridge may have to start reading it.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
import types as pytypes
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "tests" / "schemas" / "codex"
SURFACES = ("stable", "experimental")
#: The method unions of a bundle, as the report names them.
KINDS = {
    "ClientRequest": "Client requests",
    "ServerRequest": "Server requests",
    "ServerNotification": "Server notifications",
    "ClientNotification": "Client notifications",
}
USED = "used by the bridge"
NOT_USED = "not used by the bridge"

Json = Any
#: One surface: bundle file name → the bundle's JSON.
Bundles = Mapping[str, Json]


# -- a surface, flattened --------------------------------------------------------------


@dataclass
class Method:
    name: str
    kind: str
    params: str | None  # the Codex type of its params, if it has any


@dataclass
class Surface:
    """The types and methods of one surface (every bundle of it, merged)."""

    types: dict[str, Json]
    methods: dict[tuple[str, str], Method]  # (kind, name) → method


def ref_name(node: Json) -> str | None:
    ref = node.get("$ref") if isinstance(node, dict) else None
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _definitions(bundle: Json) -> Iterator[tuple[str, Json]]:
    # The full bundle keeps the v2 types under definitions.v2 (refs #/definitions/v2/X).
    for name, node in bundle.get("definitions", {}).items():
        if name == "v2" and isinstance(node, dict) and "type" not in node:
            yield from node.items()
        else:
            yield name, node


def surface(bundles: Bundles) -> Surface:
    """One surface's types (the v2 bundle's copy first, where several have one) and
    methods (the union over its bundles: anything one of them says)."""
    types: dict[str, Json] = {}
    methods: dict[tuple[str, str], Method] = {}
    for name in sorted(bundles, key=lambda n: (".v2." not in n, n)):
        own = dict(_definitions(bundles[name]))
        for type_name, node in own.items():
            types.setdefault(type_name, node)
        for kind in KINDS:
            for variant in own.get(kind, {}).get("oneOf", []):
                props = variant.get("properties", {})
                params = ref_name(props.get("params", {}))
                for method in props.get("method", {}).get("enum", []):
                    methods.setdefault((kind, method), Method(method, kind, params))
    return Surface(types, methods)


def response_of(method: Method, types: Mapping[str, Json]) -> str | None:
    """The response type of a request: Codex names it after its params (``XParams`` → ``XResponse``)."""
    if method.params and method.params.endswith("Params"):
        name = method.params[: -len("Params")] + "Response"
        return name if name in types else None
    return None


# -- reading a schema node ---------------------------------------------------------------


def _variants(node: Json) -> list[Json] | None:
    if not isinstance(node, dict):
        return None
    for key in ("oneOf", "anyOf"):
        if isinstance(node.get(key), list):
            return list(node[key])
    return None


def _is_null(node: Json) -> bool:
    return isinstance(node, dict) and (node.get("type") == "null" or node == {"enum": [None]})


def variant_key(node: Json) -> str:
    """How a union's variant is named: its type, its tag (a single-valued property), its
    value (a single-valued enum), else its title or shape."""
    name = ref_name(node)
    if name:
        return name
    tags = {
        prop: sub["enum"][0]
        for prop, sub in node.get("properties", {}).items()
        if isinstance(sub, dict)
        and isinstance(sub.get("enum"), list)
        and len(sub["enum"]) == 1
        and isinstance(sub["enum"][0], str)
    }
    if tags:
        prop = "type" if "type" in tags else next(iter(tags))
        return f"{prop}={tags[prop]}"
    values = node.get("enum")
    if isinstance(values, list):
        # A union holds at most one open enum: its values are compared, not its name.
        return json.dumps(values[0]) if len(values) == 1 else "enum"
    if _is_null(node):
        return "null"
    return node.get("title") or sig(node)


def sig(node: Json) -> str:
    """A node's type, short and readable (``array<string> | null``)."""
    if not isinstance(node, dict) or not node:
        return "any"
    name = ref_name(node)
    if name:
        return name
    if "enum" in node:
        return "enum{" + ", ".join(json.dumps(v) for v in node["enum"]) + "}"
    if "const" in node:
        return json.dumps(node["const"])
    variants = _variants(node)
    if variants is not None:
        return " | ".join(sig(v) for v in variants)
    if "allOf" in node:
        return " & ".join(sig(v) for v in node["allOf"])
    kinds = node.get("type", "object" if "properties" in node else "any")
    parts = []
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "array":
            parts.append(f"array<{sig(node.get('items', {}))}>")
        elif kind == "object" and "properties" in node:
            parts.append("{" + ", ".join(node["properties"]) + "}")
        elif kind == "object" and isinstance(node.get("additionalProperties"), dict):
            parts.append(f"map<{sig(node['additionalProperties'])}>")
        elif kind in ("integer", "number") and "format" in node:
            parts.append(f"{kind}({node['format']})")
        else:
            parts.append(str(kind))
    return " | ".join(parts)


def _shape(node: Json) -> str:
    if not isinstance(node, dict):
        return "other"
    if "properties" in node:
        return "object"
    if _variants(node) is not None:
        return "union"
    if "enum" in node:
        return "enum"
    return "other"


def _members(node: Json) -> str:
    """An inline object with its members' types (``?`` marks an optional one)."""
    props = node.get("properties") if isinstance(node, dict) else None
    if not isinstance(props, dict):
        return sig(node)
    required = set(node.get("required", []))
    return (
        "{"
        + ", ".join(
            f"{name}{'' if name in required else '?'}: {sig(sub)}" for name, sub in props.items()
        )
        + "}"
    )


def _describe(node: Json) -> str:
    shape = _shape(node)
    if shape == "object":
        return "an object"
    if shape == "union":
        return "a union of " + " | ".join(variant_key(v) for v in _variants(node) or [])
    return sig(node)


_NOISE = {"description", "title", "default", "examples", "$schema"}


def _normal(node: Json) -> Json:
    if isinstance(node, dict):
        return {k: _normal(v) for k, v in sorted(node.items()) if k not in _NOISE}
    if isinstance(node, list):
        return [_normal(v) for v in node]
    return node


def refs_in(node: Json) -> Iterator[str]:
    """Every type a node names, at any depth."""
    if isinstance(node, dict):
        name = ref_name(node)
        if name:
            yield name
        for value in node.values():
            yield from refs_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs_in(value)


# -- the comparison (pure) --------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """What the bridge uses. ``types`` and ``fields`` use the report's type paths: a Codex
    type's name, ``Name[tag=value]`` for a variant of a union, ``Name.field`` for an
    object inside a property."""

    methods: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()
    fields: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class MethodChange:
    kind: str
    name: str
    added: bool
    used: bool


@dataclass(frozen=True)
class TypeChange:
    path: str  # the type (or variant) that changed
    what: str  # the change, readable
    used: bool
    field_read: bool = False  # the bridge reads or writes this very field
    reachable: bool = False  # not used, but reachable from what the bridge uses


@dataclass
class Drift:
    methods: list[MethodChange] = field(default_factory=list)
    types: list[TypeChange] = field(default_factory=list)
    added_types: list[str] = field(default_factory=list)
    removed_types: list[tuple[str, bool]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def reachable_types(s: Surface, usage: Usage) -> set[str]:
    """Every type reachable from the params and responses of the methods the bridge uses."""
    todo = []
    for method in s.methods.values():
        if method.name in usage.methods:
            todo += [t for t in (method.params, response_of(method, s.types)) if t]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in s.types:
            continue
        seen.add(name)
        todo.extend(refs_in(s.types[name]))
    return seen


def compare(old: Bundles, new: Bundles, usage: Usage) -> Drift:
    """What changed from ``old`` to ``new`` (one surface each: bundle name → JSON), each
    change marked with whether the bridge (``usage``) uses it. Only bundles both have
    are compared."""
    drift = Drift()
    common = sorted(set(old) & set(new))
    for name in sorted(set(old) ^ set(new)):
        side = "the old" if name in old else "the new"
        drift.notes.append(f"{name} is only in {side} schema: not compared")
    before = surface({n: old[n] for n in common})
    after = surface({n: new[n] for n in common})
    for key in sorted(set(before.methods) | set(after.methods)):
        if (key in before.methods) != (key in after.methods):
            kind, name = key
            added = key in after.methods
            drift.methods.append(MethodChange(kind, name, added, name in usage.methods))
    reachable = reachable_types(before, usage) | reachable_types(after, usage)
    for name in sorted(set(before.types) | set(after.types)):
        if name in KINDS:
            continue  # the method unions: reported as methods above
        if name not in before.types:
            drift.added_types.append(name)
            continue
        if name not in after.types:
            drift.removed_types.append((name, name in usage.types))
            continue
        for path, what, prop in _diff_node(name, before.types[name], after.types[name]):
            used = path in usage.types
            root = path.split("[", 1)[0].split(".", 1)[0]
            drift.types.append(
                TypeChange(
                    path,
                    what,
                    used,
                    field_read=prop is not None and (path, prop) in usage.fields,
                    reachable=not used and root in reachable,
                )
            )
    return drift


def _diff_node(path: str, a: Json, b: Json) -> Iterator[tuple[str, str, str | None]]:
    """(type path, change, property it concerns) for every difference between two nodes."""
    if _normal(a) == _normal(b):
        return
    shape_a, shape_b = _shape(a), _shape(b)
    if shape_a != shape_b:
        yield path, f"was {_describe(a)}, now {_describe(b)}", None
    if "object" in (shape_a, shape_b):
        yield from _diff_properties(path, a, b)
    if "union" in (shape_a, shape_b):
        yield from _diff_variants(path, a, b)
    if "enum" in (shape_a, shape_b):
        yield from _diff_enum(path, a, b, None)
    if shape_a == shape_b == "other":
        yield path, f"changed: {sig(a)} → {sig(b)}", None


def _diff_enum(
    path: str, a: Json, b: Json, prop: str | None
) -> Iterator[tuple[str, str, str | None]]:
    values_a, values_b = a.get("enum") or [], b.get("enum") or []
    where = f"{prop}: " if prop else ""
    added = [json.dumps(v) for v in values_b if v not in values_a]
    removed = [json.dumps(v) for v in values_a if v not in values_b]
    if added:
        yield path, f"{where}enum values added: {', '.join(added)}", prop
    if removed:
        yield path, f"{where}enum values removed: {', '.join(removed)}", prop


def _diff_properties(path: str, a: Json, b: Json) -> Iterator[tuple[str, str, str | None]]:
    props_a, props_b = a.get("properties", {}), b.get("properties", {})
    required_a, required_b = set(a.get("required", [])), set(b.get("required", []))
    for prop in sorted(set(props_a) | set(props_b)):
        if prop not in props_a:
            need = "required" if prop in required_b else "optional"
            yield path, f"+ {prop}: {sig(props_b[prop])} ({need})", prop
            continue
        if prop not in props_b:
            yield path, f"- {prop}: {sig(props_a[prop])}", prop
            continue
        pa, pb = props_a[prop], props_b[prop]
        if _normal(pa) != _normal(pb):
            inner = _shape(pa), _shape(pb)
            if inner == ("enum", "enum"):
                yield from _diff_enum(path, pa, pb, prop)
            elif (
                "$ref" not in pa
                and "$ref" not in pb
                and inner
                in (
                    ("object", "object"),
                    ("union", "union"),
                )
            ):
                yield from _diff_node(f"{path}.{prop}", pa, pb)
            else:
                yield path, f"~ {prop}: {sig(pa)} → {sig(pb)}", prop
        if (prop in required_a) != (prop in required_b):
            now = "required" if prop in required_b else "optional"
            yield path, f"~ {prop}: now {now}", prop


def _diff_variants(path: str, a: Json, b: Json) -> Iterator[tuple[str, str, str | None]]:
    va = {variant_key(v): v for v in _variants(a) or []}
    vb = {variant_key(v): v for v in _variants(b) or []}
    for key in vb:
        if key not in va:
            yield path, f"+ variant {key}: {_members(vb[key])}", None
    for key in va:
        if key not in vb:
            yield path, f"- variant {key}", None
    for key in va:
        if key in vb and not ref_name(va[key]):
            # A union's enum of plain values belongs to the union itself.
            where = path if key == "enum" else f"{path}[{key}]"
            yield from _diff_node(where, va[key], vb[key])


# -- the report --------------------------------------------------------------------------


def _mark(used: bool) -> str:
    return USED if used else NOT_USED


def render(drifts: Mapping[str, Drift]) -> str:
    """The report: one section per surface; the experimental one leaves out what the
    stable one already says."""
    lines: list[str] = []
    said_methods: set[MethodChange] = set()
    said_types: set[tuple[str, str]] = set()  # (path, change): its marks may differ
    said_added: set[str] = set()
    said_removed: set[tuple[str, bool]] = set()
    for surface_name, drift in drifts.items():
        methods = [m for m in drift.methods if m not in said_methods]
        types = [t for t in drift.types if (t.path, t.what) not in said_types]
        beyond = " (beyond the stable changes)" if lines else ""
        lines.append(f"== {surface_name}{beyond} ==")
        lines += [f"  note: {note}" for note in drift.notes]
        for kind, title in KINDS.items():
            changed = [m for m in methods if m.kind == kind]
            if not changed:
                continue
            lines.append(f"{title}:")
            for m in changed:
                sign = "+ added  " if m.added else "- removed"
                lines.append(f"  {sign} {m.name}  [{_mark(m.used)}]")
        if not methods:
            lines.append("Methods: none added or removed")
        added = [n for n in drift.added_types if n not in said_added]
        removed = [r for r in drift.removed_types if r not in said_removed]
        if added:
            lines.append(f"Types added: {', '.join(added)}")
        for name, was_used in removed:
            lines.append(f"Type removed: {name}  [{_mark(was_used)}]")
        if types:
            lines.append("Types changed:")
            current = None
            for t in types:
                if t.path != current:
                    current = t.path
                    lines.append(f"  {t.path}")
                mark = _mark(t.used)
                if t.field_read:
                    mark += "; the bridge reads or writes this field"
                elif t.reachable:
                    mark += ", but reachable from what it uses"
                lines.append(f"    {t.what}  [{mark}]")
        else:
            lines.append("Types: no field changed")
        lines.append("")
        said_methods.update(drift.methods)
        said_types.update((t.path, t.what) for t in drift.types)
        said_added.update(drift.added_types)
        said_removed.update(drift.removed_types)
    count = len(
        {(m.kind, m.name) for d in drifts.values() for m in d.methods if m.used}
        | {(t.path, t.what) for d in drifts.values() for t in d.types if t.used}
        | {
            ("type", name)
            for d in drifts.values()
            for name, was_used in d.removed_types
            if was_used
        }
    )
    lines.append(
        f"Changes used by the bridge: {count}" if count else "Nothing the bridge uses changed"
    )
    return "\n".join(lines) + "\n"


# -- what the bridge uses (derived from its code) ----------------------------------------


def _struct_types(annotation: Any) -> Iterator[Any]:
    """The msgspec Struct types an annotation can hold (through unions, lists, dicts)."""
    import msgspec.inspect as mi

    def walk(info: Any) -> Iterator[Any]:
        if isinstance(info, mi.StructType):
            yield info
        elif isinstance(info, mi.UnionType):
            for t in info.types:
                yield from walk(t)
        elif isinstance(info, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
            yield from walk(info.item_type)
        elif isinstance(info, mi.DictType):
            yield from walk(info.value_type)

    if _is_type_alias(annotation):  # a union msgspec cannot decode whole (read by hand)
        for member in typing.get_args(annotation):
            yield from _struct_types(member)
        return
    try:
        info = mi.type_info(annotation)
    except (TypeError, ValueError):
        return
    yield from walk(info)


def _tag_of(info: Any) -> tuple[str, Any] | None:
    if info.tag_field is None:
        return None
    return info.tag_field, info.tag


def walk_structs(
    types: Mapping[str, Json], roots: Iterable[tuple[Any, str]]
) -> tuple[set[str], set[tuple[str, str]]]:
    """Pair each root Struct (or alias) with its Codex type and walk both side by side:
    the type paths reached, and the (path, field) pairs the Structs declare."""
    used: set[str] = set()
    fields: set[tuple[str, str]] = set()
    seen: set[tuple[int, str]] = set()

    def pair(infos: list[Any], node: Json, path: str) -> None:
        if not isinstance(node, dict):
            return
        name = ref_name(node)
        if name is not None:
            if name in types:
                used.add(name)
                pair(infos, types[name], name)
            return
        variants = _variants(node)
        if variants is not None:
            if any(i.tag_field is not None for i in infos):
                # An untagged Struct beside tagged ones is the fallback for the other
                # variants (kept unread): it pairs with none of them.
                infos = [i for i in infos if i.tag_field is not None]
            for variant in variants:
                if _is_null(variant):
                    continue
                fit = [i for i in infos if _fits(i, variant, types)]
                if fit:
                    target = ref_name(variant)
                    pair(fit, variant, path if target else f"{path}[{variant_key(variant)}]")
            return
        if node.get("type") == "array" or "items" in node:
            pair(infos, node.get("items", {}), path)
            return
        if isinstance(node.get("additionalProperties"), dict) and "properties" not in node:
            pair(infos, node["additionalProperties"], path)
            return
        props = node.get("properties")
        if not isinstance(props, dict):
            return
        used.add(path)
        for info in infos:
            key = (id(info.cls), path)
            if key in seen:
                continue
            seen.add(key)
            if info.tag_field in props:  # the tag the Struct is told apart by
                fields.add((path, info.tag_field))
            for f in info.fields:
                if f.encode_name not in props:
                    continue
                fields.add((path, f.encode_name))
                sub = props[f.encode_name]
                inner = list(_struct_types(f.type))
                if inner:
                    pair(inner, sub, f"{path}.{f.encode_name}")
                else:
                    used.update(n for n in _top_refs(sub) if n in types)

    import msgspec

    for annotation, type_name in roots:
        if type_name not in types:
            continue
        infos = list(_struct_types(annotation))
        if infos:
            pair(infos, {"$ref": f"#/definitions/{type_name}"}, type_name)
        elif annotation is Any or annotation is msgspec.Raw:
            used.add(type_name)
    return used, fields


def _top_refs(node: Json) -> Iterator[str]:
    """The types a property names directly (through nullable unions and arrays)."""
    if not isinstance(node, dict):
        return
    name = ref_name(node)
    if name:
        yield name
        return
    for variant in _variants(node) or []:
        yield from _top_refs(variant)
    if isinstance(node.get("items"), dict):
        yield from _top_refs(node["items"])


def _fits(info: Any, variant: Json, types: Mapping[str, Json]) -> bool:
    """Whether a Struct decodes this union variant: by its tag, else (untagged) by a
    shared field."""
    name = ref_name(variant)
    node = types.get(name, {}) if name else variant
    props = node.get("properties", {}) if isinstance(node, dict) else {}
    tag = _tag_of(info)
    if tag is not None:
        values = props.get(tag[0], {}).get("enum", [])
        return bool(values == [tag[1]])
    if not props:
        return isinstance(node, dict) and _variants(node) is not None
    return any(f.encode_name in props for f in info.fields)


def _bridge_modules() -> list[Any]:
    import importlib
    import pkgutil

    import bridge.codex

    return [
        importlib.import_module(f"bridge.codex.{m.name}")
        for m in pkgutil.iter_modules(bridge.codex.__path__)
    ]


def _string_constants(paths: Iterable[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def _codex_request_calls(paths: Iterable[Path]) -> Iterator[tuple[str, str | None, str | None]]:
    """(method, params Struct name, result Struct name) of each ``codex_request`` call
    that names its method literally."""

    def last_name(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Call):
            expr = expr.func
        if isinstance(expr, ast.Attribute):
            return expr.attr
        if isinstance(expr, ast.Name):
            return expr.id
        return None

    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "codex_request"
                and len(node.args) >= 3
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            params = last_name(node.args[1]) if isinstance(node.args[1], ast.Call) else None
            yield node.args[0].value, params, last_name(node.args[2])


def bridge_usage(schemas: Iterable[Surface], root: Path = ROOT) -> Usage:
    """What this tree's bridge uses of these schemas (see the module's docstring)."""
    import msgspec

    from bridge.codex import messages
    from bridge.engine.engine import Engine

    schemas = list(schemas)
    engine = Engine()
    handled = set(engine.codex_router.routes)
    sources = [
        p for p in sorted((root / "bridge").rglob("*.py")) if p != root / "bridge/codex/methods.py"
    ]
    constants = _string_constants(sources)
    structs: dict[str, Any] = {}
    for module in _bridge_modules():
        for name, value in vars(module).items():
            is_struct = isinstance(value, type) and issubclass(value, msgspec.Struct)
            if is_struct or _is_type_alias(value):
                structs.setdefault(name, value)
    calls = list(_codex_request_calls(sources))
    methods: set[str] = set()
    types: set[str] = set()
    fields: set[tuple[str, str]] = set()
    for s in schemas:
        sent = {
            m.name
            for (kind, _), m in s.methods.items()
            if kind in ("ClientRequest", "ClientNotification") and m.name in constants
        }
        got = {
            m.name
            for (kind, _), m in s.methods.items()
            if kind in ("ServerRequest", "ServerNotification") and m.name in handled
        }
        methods |= sent | got
        roots: list[tuple[Any, str]] = [(v, n) for n, v in structs.items() if n in s.types]
        by_method = {m.name: m for m in s.methods.values()}
        for method, kind in {**messages.NOTIFICATIONS, **messages.REQUESTS}.items():
            params_type = by_method[method].params if method in by_method else None
            if params_type:
                roots.append((kind, params_type))
        for method, params, result in calls:
            m = by_method.get(method)
            if m is None:
                continue
            if params in structs and m.params:
                roots.append((structs[params], m.params))
            response = response_of(m, s.types)
            if result in structs and response:
                roots.append((structs[result], response))
        reached, read = walk_structs(s.types, roots)
        types |= reached
        fields |= read
        for m in s.methods.values():
            if m.name in sent | got:
                types.update(t for t in (m.params, response_of(m, s.types)) if t)
    return Usage(frozenset(methods), frozenset(types), frozenset(fields))


def _is_type_alias(value: Any) -> bool:
    return typing.get_origin(value) in (typing.Union, pytypes.UnionType)


# -- running Codex ------------------------------------------------------------------------


class Failure(Exception):
    """npm or Codex failed: the one-line reason."""


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failure(f"{what} failed: {exc}") from None
    if done.returncode != 0:
        # The first line that says what is wrong (npm ends with where its log is).
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        said = [
            line.removeprefix("npm error ").strip()
            for line in lines
            if "complete log of this run" not in line and not line.startswith("npm error code")
        ]
        raise Failure(f"{what} failed (exit {done.returncode}): {(said or lines)[0]}")


def generate(codex: str | Path, out: Path) -> dict[str, dict[str, Json]]:
    """Both surfaces' bundles as this Codex binary generates them."""
    result: dict[str, dict[str, Json]] = {}
    for name in SURFACES:
        folder = out / name
        flags = ["--experimental"] if name == "experimental" else []
        argv = [str(codex), "app-server", "generate-json-schema", *flags, "--out", str(folder)]
        _run(argv, f"codex app-server generate-json-schema{' --experimental' if flags else ''}")
        result[name] = _bundles(folder)
    return result


def _bundles(folder: Path) -> dict[str, Json]:
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.schemas.json"))}


def stored() -> dict[str, dict[str, Json]]:
    """The schemas the bridge was generated from."""
    return {"stable": _bundles(STORED), "experimental": _bundles(STORED / "experimental")}


def report(old: Mapping[str, Bundles], new: Mapping[str, Bundles]) -> str:
    """Derive the bridge's usage from both schemas, compare each surface, render."""
    sets = [surface(b) for side in (old, new) for b in side.values()]
    usage = bridge_usage(sets)
    return render({name: compare(old[name], new[name], usage) for name in SURFACES})


def install(version: str, prefix: Path) -> Path:
    if shutil.which("npm") is None:
        raise Failure("npm is not on PATH (it comes with Node.js)")
    package = f"@openai/codex@{version}"
    argv = [
        "npm",
        "install",
        "--prefix",
        str(prefix),
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        package,
    ]
    _run(argv, f"npm install {package}")
    codex = prefix / "node_modules" / ".bin" / "codex"
    if not codex.exists():
        raise Failure(f"npm install {package} gave no codex binary")
    return codex


def _stored_version() -> str:
    from bridge.codex.methods import CODEX_VERSION

    return CODEX_VERSION


def _version_of(codex: Path) -> str:
    try:
        done = subprocess.run([str(codex), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failure(f"{codex} --version failed: {exc}") from None
    return done.stdout.strip().rsplit(" ", 1)[-1] or str(codex)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("version", help="the @openai/codex version to compare, e.g. 0.171.0")
    parser.add_argument(
        "--codex",
        metavar="BINARY",
        help="generate the new schema with this codex binary instead of installing VERSION",
    )
    parser.add_argument(
        "--baseline-codex",
        metavar="BINARY",
        help="compare against what this binary generates instead of the stored copies "
        "(tests/schemas/codex/ keeps only the v2 bundle of the experimental surface, "
        "so only this compares the experimental server requests)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="codex-drift-") as tmp:
        try:
            if args.baseline_codex:
                baseline = Path(args.baseline_codex)
                old = generate(baseline, Path(tmp) / "baseline")
                source = f"Codex {_version_of(baseline)} ({baseline})"
            else:
                old = stored()
                source = f"Codex {_stored_version()} (tests/schemas/codex/, what the bridge was generated from)"
            codex = Path(args.codex) if args.codex else install(args.version, Path(tmp) / "npm")
            new = generate(codex, Path(tmp) / "schema")
        except Failure as exc:
            print(f"codex-drift: {exc}", file=sys.stderr)
            return 1
    print(f"{source} → Codex {args.version}")
    print()
    print(report(old, new), end="")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this tree's bridge, whatever the venv points at
    sys.exit(main())

"""docs/mapping.md's coverage table against ACP's schemas and the engine's routing.

The table ("## Coverage: every ACP method, update and capability") has one row per ACP
method (by direction), ``session/update`` kind and agent or client capability that ACP's
v1 and v2 schemas (stable and unstable, ``tests/schemas/acp``) define, each saying which
schemas have it and what the bridge does with it in Codex's terms, or why not.

:func:`coverage_problems` derives the entries from the schema files (methods from the
``x-method`` / ``x-side`` annotations of their request and notification types, update
kinds from ``SessionUpdate``'s ``sessionUpdate`` constants, capabilities from the
properties under ``AgentCapabilities`` and ``ClientCapabilities``) and reads the table:
an entry without a row, a row without an entry (stale), a wrong schemas cell or an empty
answer is a problem. A newer schema adds entries; this test then names each one.

The engine's routing is held to the same list: every method a client may send the bridge
is handled (never -32601 "method not found"), but for the ones :data:`UNROUTED` names,
each of which the table says is answered -32601.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_harness import Harness

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "tests" / "schemas" / "acp"
DOC = ROOT / "docs" / "mapping.md"
HEADING = "## Coverage: every ACP method, update and capability"

#: The schema files, by the name the table gives each: (version, unstable?).
FILES = {
    ("v1", False): "v1/schema.json",
    ("v1", True): "v1/schema.unstable.json",
    ("v2", False): "v2/schema.json",
    ("v2", True): "v2/schema.unstable.json",
}

#: A method's kind, by its type's ``x-side`` (who handles it) and what the type is.
_KINDS = {
    ("agent", "Request"): "request to agent",
    ("agent", "Notification"): "notification to agent",
    ("client", "Request"): "request to client",
    ("client", "Notification"): "notification to client",
    ("protocol", "Notification"): "notification either way",
    ("proxy", "Request"): "request to proxy",
    ("proxy", "Notification"): "notification to proxy",
}

#: (kind, entry): one row of the table.
Entry = tuple[str, str]


def _resolve(defs: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The object schema ``node`` stands for: through ``$ref`` and a one-branch
    ``allOf`` / ``anyOf`` / ``oneOf`` (``null`` aside)."""
    while True:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
            continue
        if "properties" in node:
            return node
        for key in ("allOf", "anyOf", "oneOf"):
            branches = [b for b in node.get(key, []) if b.get("type") != "null"]
            if len(branches) == 1:
                node = branches[0]
                break
        else:
            return node


def _capabilities(defs: dict[str, Any], node: dict[str, Any], prefix: str) -> Iterator[str]:
    for name, sub in _resolve(defs, node).get("properties", {}).items():
        if name == "_meta":
            continue
        yield prefix + name
        yield from _capabilities(defs, sub, prefix + name + ".")


def schema_entries(defs: dict[str, Any]) -> set[Entry]:
    """Every method, update kind and capability one schema file defines."""
    entries: set[Entry] = set()
    for name, node in defs.items():
        if "x-method" not in node:
            continue
        what = next((w for w in ("Request", "Notification") if name.endswith(w)), None)
        if what is not None:  # responses name the same methods as their requests
            entries.add((_KINDS[(node["x-side"], what)], node["x-method"]))
    update = defs["SessionUpdate"]
    for branch in update.get("oneOf", update.get("anyOf", [])):
        tag = branch.get("properties", {}).get("sessionUpdate", {})
        if "const" in tag:  # v2's open branch for custom kinds has none
            entries.add(("update", tag["const"]))
    for side in ("agent", "client"):
        root = defs[f"{side.capitalize()}Capabilities"]
        entries |= {(f"{side} capability", c) for c in _capabilities(defs, root, "")}
    return entries


def derived(schema_dir: Path) -> dict[Entry, str]:
    """Each entry → its schemas cell: ``v1`` (stable, so unstable too), ``v1 unstable``
    (only there), the same for v2, comma-separated."""
    found: dict[Entry, list[tuple[str, bool]]] = {}
    for (version, unstable), path in FILES.items():
        defs = json.loads((schema_dir / path).read_text())["$defs"]
        for entry in schema_entries(defs):
            found.setdefault(entry, []).append((version, unstable))
    cells = {}
    for entry, places in found.items():
        names = []
        for version in ("v1", "v2"):
            if (version, False) in places:
                names.append(version)
            elif (version, True) in places:
                names.append(f"{version} unstable")
        cells[entry] = ", ".join(names)
    return cells


def table_rows(doc: str) -> list[list[str]]:
    """The cells of each row of the coverage table (header and rule excluded)."""
    start = doc.index(HEADING + "\n") + len(HEADING) + 1
    following = re.search(r"^## ", doc[start:], re.MULTILINE)
    section = doc[start : start + following.start()] if following else doc[start:]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows[1:]


def coverage_problems(schema_dir: Path, doc: str) -> list[str]:
    """What the coverage table in ``doc`` gets wrong about the schemas in ``schema_dir``,
    one line each (none: the table is whole and current)."""
    if HEADING + "\n" not in doc:
        return [f"no coverage table: no section {HEADING!r}"]
    want = derived(schema_dir)
    problems = []
    seen: set[Entry] = set()
    for cells in table_rows(doc):
        if len(cells) != 4:
            problems.append(f"row of {len(cells)} cells, not 4: {cells}")
            continue
        kind, name, schemas, does = cells
        entry = (kind, name.strip("`"))
        if entry in seen:
            problems.append(f"row twice: {kind} {name}")
        seen.add(entry)
        if entry not in want:
            problems.append(f"stale row (no schema has it): {kind} {name}")
            continue
        if schemas != want[entry]:
            problems.append(f"{kind} {name}: schemas {schemas!r}, the files say {want[entry]!r}")
        if not does:
            problems.append(f"{kind} {name}: nothing says what the bridge does")
    problems += [f"no row: {kind} `{name}`" for kind, name in sorted(want.keys() - seen)]
    return problems


def test_the_coverage_table_has_every_schema_entry_and_nothing_else() -> None:
    problems = coverage_problems(SCHEMAS, DOC.read_text())
    assert not problems, "docs/mapping.md's coverage table:\n" + "\n".join(problems)


# -- the checker itself ------------------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "acp"
    shutil.copytree(SCHEMAS, copy)
    return copy


def _edit(path: Path, change: Any) -> None:
    schema = json.loads(path.read_text())
    change(schema["$defs"])
    path.write_text(json.dumps(schema))


def test_a_made_up_method_update_and_capability_are_each_reported(tmp_path: Path) -> None:
    schemas = _copy(tmp_path)

    def invent(defs: dict[str, Any]) -> None:
        defs["FrobnicateSessionRequest"] = {
            "type": "object",
            "x-method": "session/frobnicate",
            "x-side": "agent",
        }
        defs["FrobnicateSessionResponse"] = {
            "type": "object",
            "x-method": "session/frobnicate",
            "x-side": "agent",
        }
        defs["SessionUpdate"]["anyOf"].append(
            {"type": "object", "properties": {"sessionUpdate": {"const": "frobnication"}}}
        )
        defs["ClientCapabilities"]["properties"]["frobnicate"] = {"type": "boolean"}

    _edit(schemas / "v2" / "schema.unstable.json", invent)
    assert coverage_problems(schemas, DOC.read_text()) == [
        "no row: client capability `frobnicate`",
        "no row: request to agent `session/frobnicate`",
        "no row: update `frobnication`",
    ]


def test_a_capability_nested_in_a_referenced_type_is_reported(tmp_path: Path) -> None:
    schemas = _copy(tmp_path)
    _edit(
        schemas / "v1" / "schema.json",
        lambda defs: defs["FileSystemCapabilities"]["properties"].update(
            {"frobnicate": {"type": "boolean"}}
        ),
    )
    assert coverage_problems(schemas, DOC.read_text()) == [
        "no row: client capability `fs.frobnicate`"
    ]


def test_a_row_no_schema_has_and_a_wrong_or_empty_cell_are_reported() -> None:
    doc = DOC.read_text()
    rule = "| --- | --- | --- | --- |\n"
    assert rule in doc[doc.index(HEADING) :]
    at = doc.index(rule, doc.index(HEADING)) + len(rule)
    stale = "| request to agent | `session/frobnicate` | v2 | `thread/frobnicate` |\n"
    changed = doc[:at] + stale + doc[at:]
    row = next(r for r in table_rows(doc) if r[:2] == ["request to agent", "`session/close`"])
    changed = changed.replace(" | ".join(row), " | ".join([*row[:2], "v2", ""]).rstrip(), 1)
    assert coverage_problems(SCHEMAS, changed) == [
        "stale row (no schema has it): request to agent `session/frobnicate`",
        "request to agent `session/close`: schemas 'v2', the files say 'v1, v2'",
        "request to agent `session/close`: nothing says what the bridge does",
    ]


# -- the routing -------------------------------------------------------------------------

#: The methods a client may send that the bridge answers -32601 today: (face, method). Each
#: row of the table says so. ``v1`` is a client declaring nothing unstable (the stable
#: schema's methods), ``v1 unstable`` one declaring ``subagents``.
UNROUTED: set[tuple[str, str]] = set()

#: The methods meant for a proxy, not an agent: the bridge is no proxy.
_PROXY = ("request to proxy", "notification to proxy")


def _client_methods(face: str) -> set[str]:
    """The requests a client of ``face`` may send the bridge, by the schema it speaks."""
    version, _, unstable = face.partition(" ")
    path = FILES[(version, bool(unstable))]
    defs = json.loads((SCHEMAS / path).read_text())["$defs"]
    return {name for kind, name in schema_entries(defs) if kind == "request to agent"}


def _initialized(face: str) -> Harness:
    h = Harness()
    if face == "v2":
        params: dict[str, Any] = {"protocolVersion": 2, "capabilities": {}}
    else:
        declared = {"subagents": {}} if face == "v1 unstable" else {}
        params = {"protocolVersion": 1, "clientCapabilities": declared}
    rid = h.client_request("initialize", params)
    assert "result" in (h.client_response(rid) or {}), h.client_response(rid)
    return h


@pytest.mark.parametrize("face", ["v1", "v1 unstable", "v2"])
def test_every_schema_method_is_routed_but_the_ones_the_table_says_are_not(face: str) -> None:
    """Each request the client's schema has, sent with empty params: anything but -32601
    (most are -32602 for the missing fields; some go on to Codex)."""
    unrouted = set()
    for method in sorted(_client_methods(face)):
        h = _initialized(face)
        rid = h.client_request(method, {})
        answer = h.client_response(rid)
        if answer is not None and answer.get("error", {}).get("code") == -32601:
            unrouted.add((face, method))
    assert unrouted == {(f, m) for f, m in UNROUTED if f == face}


@pytest.mark.parametrize("face", ["v1 unstable", "v2"])
def test_a_proxy_method_is_not_found_as_its_row_says(face: str) -> None:
    """The bridge is an agent: a proxy's requests are not its own (-32601)."""
    rows = {(r[0], r[1].strip("`")): r[3] for r in table_rows(DOC.read_text()) if len(r) == 4}
    for method in ("proxy/initialize", "proxy/successor"):
        h = _initialized(face)
        rid = h.client_request(method, {})
        assert (h.client_response(rid) or {}).get("error", {}).get("code") == -32601, method
        assert "-32601" in rows[("request to proxy", method)], method


def test_each_unrouted_method_is_a_row_saying_so() -> None:
    rows = {(r[0], r[1].strip("`")): r[3] for r in table_rows(DOC.read_text()) if len(r) == 4}
    for _face, method in UNROUTED:
        assert "-32601" in rows[("request to agent", method)], method

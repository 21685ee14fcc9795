"""scripts/codex_drift.py: what a Codex release changes, and whether the bridge uses it.

The comparison is tested on small hand-made schemas; the whole report against the stored
schemas with the pinned Codex, which must find nothing (the stored copies are what it
generates). Installing another version from npm is left to running the script.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest

from bridge.shell.codex_transport import PINNED_CODEX
from tests.conftest import REPO


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "codex_drift", REPO / "scripts" / "codex_drift.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["codex_drift"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


drift = _load()
BUNDLE = "codex_app_server_protocol.v2.schemas.json"


def _method(name: str, params: str) -> dict[str, Any]:
    return {
        "properties": {
            "method": {"enum": [name], "type": "string"},
            "params": {"$ref": f"#/definitions/{params}"},
        },
        "type": "object",
    }


def _bundle(
    types: dict[str, Any],
    requests: dict[str, str] | None = None,
    notifications: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One surface of one v2 bundle: its types, client requests and server notifications."""
    definitions = dict(types)
    definitions["ClientRequest"] = {"oneOf": [_method(m, p) for m, p in (requests or {}).items()]}
    definitions["ServerNotification"] = {
        "oneOf": [_method(m, p) for m, p in (notifications or {}).items()]
    }
    return {BUNDLE: {"definitions": definitions}}


def _obj(required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or []}


STR = {"type": "string"}
NULLABLE_STR = {"type": ["string", "null"]}


def _changes(result: Any) -> set[tuple[str, str, bool]]:
    return {(t.path, t.what, t.used) for t in result.types}


def test_added_and_removed_methods_are_listed_by_kind_with_their_use() -> None:
    old = _bundle(
        {"StartParams": _obj(), "GoneParams": _obj(), "NoteParams": _obj()},
        requests={"thing/start": "StartParams", "thing/gone": "GoneParams"},
        notifications={"thing/noted": "NoteParams"},
    )
    new = _bundle(
        {"StartParams": _obj(), "NewParams": _obj(), "NoteParams": _obj(), "Heard": _obj()},
        requests={"thing/start": "StartParams", "thing/new": "NewParams"},
        notifications={"thing/noted": "NoteParams", "thing/heard": "Heard"},
    )
    usage = drift.Usage(methods=frozenset({"thing/start", "thing/gone"}))

    result = drift.compare(old, new, usage)

    assert {(m.kind, m.name, m.added, m.used) for m in result.methods} == {
        ("ClientRequest", "thing/gone", False, True),
        ("ClientRequest", "thing/new", True, False),
        ("ServerNotification", "thing/heard", True, False),
    }
    assert result.added_types == ["Heard", "NewParams"]
    assert result.removed_types == [("GoneParams", False)]
    text = drift.render({"stable": result})
    assert "Client requests:\n  + added   thread" not in text
    assert "  - removed thing/gone  [used by the bridge]" in text
    assert "  + added   thing/new  [not used by the bridge]" in text
    assert "Server notifications:\n  + added   thing/heard  [not used by the bridge]" in text


def test_changed_fields_are_each_marked_used_or_not() -> None:
    old = _bundle(
        {
            "Item": _obj(["id", "text"], id=STR, text=STR, size={"type": "integer"}),
            "Other": _obj(name=STR),
        }
    )
    new = _bundle(
        {
            "Item": _obj(["id"], id={"type": "integer"}, text=STR, display=NULLABLE_STR),
            "Other": _obj(name=STR, extra=STR),
        }
    )
    usage = drift.Usage(types=frozenset({"Item"}), fields=frozenset({("Item", "id")}))

    result = drift.compare(old, new, usage)

    assert _changes(result) == {
        ("Item", "+ display: string | null (optional)", True),
        ("Item", "~ id: string → integer", True),
        ("Item", "- size: integer", True),
        ("Item", "~ text: now optional", True),
        ("Other", "+ extra: string (optional)", False),
    }
    read = {t.what for t in result.types if t.field_read}
    assert read == {"~ id: string → integer"}
    text = drift.render({"stable": result})
    assert (
        "~ id: string → integer  [used by the bridge; the bridge reads or writes this field]"
        in text
    )
    assert "+ extra: string (optional)  [not used by the bridge]" in text


def test_enum_values_added_and_removed() -> None:
    old = _bundle(
        {
            "Reason": {"type": "string", "enum": ["a", "b"]},
            "Error": {
                "oneOf": [{"type": "string", "enum": ["x", "y"]}, _obj(["other"], other=STR)]
            },
            "Holder": _obj(kind={"type": "string", "enum": ["on"]}),
        }
    )
    new = _bundle(
        {
            "Reason": {"type": "string", "enum": ["a", "c"]},
            "Error": {
                "oneOf": [{"type": "string", "enum": ["x", "y", "z"]}, _obj(["other"], other=STR)]
            },
            "Holder": _obj(kind={"type": "string", "enum": ["on", "off"]}),
        }
    )

    result = drift.compare(old, new, drift.Usage(types=frozenset({"Error"})))

    assert _changes(result) == {
        ("Reason", 'enum values added: "c"', False),
        ("Reason", 'enum values removed: "b"', False),
        ("Error", 'enum values added: "z"', True),
        ("Holder", 'kind: enum values added: "off"', False),
    }


def test_union_variants_added_removed_and_changed() -> None:
    def variant(tag: str, **props: Any) -> dict[str, Any]:
        return _obj(["type"], type={"type": "string", "enum": [tag]}, **props)

    old = _bundle(
        {
            "Display": _obj(["action"], action=STR),
            "Shown": {"oneOf": [variant("text", text=STR), variant("image", url=STR)]},
        }
    )
    new = _bundle(
        {
            "Display": {
                "oneOf": [
                    _obj(["mode"], mode={"type": "string", "enum": ["show"]}),
                    _obj(["mode"], mode={"type": "string", "enum": ["hide"]}, replacement=STR),
                ]
            },
            "Shown": {
                "oneOf": [variant("text", text=STR, note=STR), variant("audio", clip=STR)],
            },
        }
    )
    usage = drift.Usage(
        methods=frozenset({"thing/show"}),
        types=frozenset({"Shown", "Shown[type=text]"}),
    )

    result = drift.compare(old, new, usage)

    assert _changes(result) == {
        ("Display", "was an object, now a union of mode=show | mode=hide", False),
        ("Display", "- action: string", False),
        ("Display", '+ variant mode=show: {mode: enum{"show"}}', False),
        ("Display", '+ variant mode=hide: {mode: enum{"hide"}, replacement?: string}', False),
        ("Shown", '+ variant type=audio: {type: enum{"audio"}, clip?: string}', True),
        ("Shown", "- variant type=image", True),
        ("Shown[type=text]", "+ note: string (optional)", True),
    }


def test_a_type_the_bridge_does_not_use_is_flagged_when_reachable_from_one_it_does() -> None:
    def schema(item: dict[str, Any]) -> dict[str, Any]:
        types = {
            "ReadParams": _obj(),
            "ReadResponse": _obj(item={"$ref": "#/definitions/Item"}),
            "Item": _obj(display={"$ref": "#/definitions/Display"}),
            "Display": item,
            "Lone": item,
        }
        return _bundle(types, requests={"thing/read": "ReadParams"})

    old, new = schema(_obj(action=STR)), schema(_obj(action=STR, mode=STR))
    usage = drift.Usage(methods=frozenset({"thing/read"}), types=frozenset({"ReadResponse"}))

    result = drift.compare(old, new, usage)

    reachable = {t.path: t.reachable for t in result.types}
    assert reachable == {"Display": True, "Lone": False}
    assert "[not used by the bridge, but reachable from what it uses]" in drift.render(
        {"stable": result}
    )


def test_the_experimental_section_leaves_out_what_the_stable_one_says() -> None:
    old = _bundle({"P": _obj()}, requests={"a": "P"})
    new_stable = _bundle({"P": _obj(x=STR)}, requests={"a": "P", "b": "P"})
    new_experimental = _bundle({"P": _obj(x=STR)}, requests={"a": "P", "b": "P", "c": "P"})
    usage = drift.Usage()

    text = drift.render(
        {
            "stable": drift.compare(old, new_stable, usage),
            "experimental": drift.compare(old, new_experimental, usage),
        }
    )

    stable, experimental = text.split("== experimental (beyond the stable changes) ==")
    assert "+ added   b" in stable and "+ x: string" in stable
    assert "+ added   c" in experimental
    assert "+ added   b" not in experimental and "+ x: string" not in experimental
    assert text.endswith("Nothing the bridge uses changed\n")


class _Text(msgspec.Struct, tag="text", tag_field="type"):
    text: str


class _Fallback(msgspec.Struct):
    type: str
    id: str


class _Item(msgspec.Struct):
    id: str
    parts: list[_Text]
    mode: Any = None


#: Read by hand, as the bridge reads items: a tagged Struct and the fallback for the rest.
_Part = _Text | _Fallback


def test_the_walk_pairs_structs_with_codex_types_field_by_field() -> None:
    types = {
        "Item": _obj(
            id=STR,
            parts={"type": "array", "items": {"$ref": "#/definitions/Part"}},
            mode={"anyOf": [{"$ref": "#/definitions/Mode"}, {"type": "null"}]},
            unread={"$ref": "#/definitions/Unread"},
        ),
        "Part": {
            "oneOf": [
                _obj(type={"type": "string", "enum": ["text"]}, text=STR, size=STR),
                _obj(type={"type": "string", "enum": ["image"]}, url=STR, id=STR),
            ]
        },
        "Mode": {"type": "string", "enum": ["on"]},
        "Unread": _obj(x=STR),
    }

    used, fields = drift.walk_structs(types, [(_Item, "Item"), (_Part, "Part")])

    # The untagged fallback beside a tagged Struct reads no variant (image stays unused);
    # a field held as Any still uses the type it names; an undeclared one does not.
    assert used == {"Item", "Part", "Part[type=text]", "Mode"}
    assert fields == {
        ("Item", "id"),
        ("Item", "parts"),
        ("Item", "mode"),
        ("Part[type=text]", "type"),
        ("Part[type=text]", "text"),
    }


def test_the_bridge_usage_comes_from_its_code() -> None:
    stored = drift.stored()
    usage = drift.bridge_usage([drift.surface(bundles) for bundles in stored.values()])

    # Sent (a string constant in the bridge) and handled (the engine's routing tables).
    assert {"thread/start", "turn/start", "initialize", "initialized"} <= usage.methods
    assert {"turn/completed", "item/commandExecution/requestApproval"} <= usage.methods
    assert "fuzzyFileSearch/sessionUpdated" not in usage.methods
    # The params Structs, walked: a field the bridge declares, and one it does not.
    assert {"TurnStartParams", "TurnCompletedNotification", "Turn"} <= usage.types
    assert ("TurnStartParams", "threadId") in usage.fields
    assert ("TurnStartParams", "outputSchema") not in usage.fields


@pytest.mark.e2e
def test_the_pinned_codex_generates_exactly_the_stored_schemas() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "codex_drift.py"),
            "pinned",
            "--codex",
            str(PINNED_CODEX),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("Methods: none added or removed") == 2, out
    assert out.count("Types: no field changed") == 2, out
    assert "Types added" not in out and "Type removed" not in out, out
    assert out.endswith("Nothing the bridge uses changed\n"), out


def test_a_failing_install_says_why_in_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "codex_drift.py"),
            "0.0.0",
            "--codex",
            str(tmp_path / "missing-codex"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("codex-drift: codex app-server generate-json-schema failed")
    assert result.stderr.count("\n") == 1

"""``tests.support.acp_schema``'s shortcuts: the memo of valid values spares a second walk of
the schema for a value already found valid, and never answers for one the schema would tell
apart; the tagged unions, tried by their tag first, give the standard keywords' verdicts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from tests.support.acp_schema import _definition, _schema, _validator, validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# Pure schema checks: well under a second; the bound only turns a hang into a failure.
pytestmark = pytest.mark.timeout(30)


def commands(listed: Any) -> dict[str, Any]:
    return {
        "sessionId": "sess_memo",
        "update": {"sessionUpdate": "available_commands_update", "availableCommands": listed},
    }


def test_a_value_found_valid_is_valid_again_also_as_a_copy() -> None:
    value = commands([{"name": "review", "description": "Review the changes"}])
    validate("SessionNotification", value)
    validate("SessionNotification", value)
    validate("SessionNotification", copy.deepcopy(value))


def test_an_invalid_value_raises_each_time() -> None:
    value = {"stopReason": "finished"}
    for _ in range(2):
        with pytest.raises(ValidationError):
            validate("PromptResponse", value)


def test_what_the_schema_tells_apart_is_checked_afresh() -> None:
    validate("SessionNotification", commands([]))
    # A tuple is no JSON array, though its repr is close and msgspec would encode it alike.
    with pytest.raises(ValidationError):
        validate("SessionNotification", commands(()))
    # The same value under another definition.
    with pytest.raises(ValidationError):
        validate("PromptResponse", commands([]))


def test_a_value_valid_as_published_is_checked_afresh_against_the_closed_unions() -> None:
    tool_call = {"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "ls"}
    params = {"sessionId": "sess_memo", "update": tool_call}
    validate("UpdateSessionNotification", params, unstable=True, version=2, future_variants=True)
    with pytest.raises(ValidationError):
        validate("UpdateSessionNotification", params, unstable=True, version=2)


def test_a_value_changed_after_it_was_found_valid_is_checked_as_it_now_is() -> None:
    value = commands([])
    validate("SessionNotification", value)
    value["update"]["availableCommands"] = [{"name": 1}]
    with pytest.raises(ValidationError):
        validate("SessionNotification", value)


def updates_of_each_shape() -> list[dict[str, Any]]:
    """The first ``session/update`` params of each kind (and content type) the fixtures hold."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(FIXTURES.rglob("*.acp.jsonl")):
        for line in path.read_text().splitlines():
            message = json.loads(line)
            if message.get("method") == "session/update":
                update = message["params"]["update"]
                content = update.get("content")
                kind = content.get("type", "") if isinstance(content, dict) else ""
                found.setdefault((update["sessionUpdate"], kind), message["params"])
    return list(found.values())


def changed(params: dict[str, Any]) -> list[dict[str, Any]]:
    """``params`` with its tag swapped for another kind's, an extension's and a non-string, its
    content's tag swapped, and each of the update's own fields dropped in turn."""
    out = []
    for tag in ("tool_call", "agent_thought_chunk", "_codex/extra", 7):
        value = copy.deepcopy(params)
        value["update"]["sessionUpdate"] = tag
        out.append(value)
    if isinstance(params["update"].get("content"), dict):
        for tag in ("image", "diff", "_x"):
            value = copy.deepcopy(params)
            value["update"]["content"]["type"] = tag
            out.append(value)
    for key in params["update"]:
        value = copy.deepcopy(params)
        del value["update"][key]
        out.append(value)
    return out


@pytest.mark.parametrize(
    ("unstable", "version", "closed"), [(False, 1, False), (True, 1, False), (True, 2, True)]
)
def test_tagged_unions_tried_by_their_tag_give_the_standard_verdicts_and_errors(
    unstable: bool, version: int, closed: bool
) -> None:
    name = _definition(unstable, "session/update", "client", "Notification", version)
    defs = _schema(unstable, version, closed)["$defs"]
    standard = Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{name}"})
    shortcut = _validator(unstable, name, version, closed)
    checked = valid = 0
    for params in updates_of_each_shape():
        for value in [params, *changed(params)]:
            expected, got = (
                best_match(standard.iter_errors(value)),
                best_match(shortcut.iter_errors(value)),
            )
            assert (got is None) == (expected is None), value
            if expected is not None and got is not None:
                assert (got.message, got.path, got.schema_path) == (
                    expected.message,
                    expected.path,
                    expected.schema_path,
                ), value
            checked += 1
            valid += expected is None
    assert checked > 100 and 0 < valid < checked, (checked, valid)

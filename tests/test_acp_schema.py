"""``tests.support.acp_schema``'s memo of valid values: it spares a second walk of the schema
for a value already found valid, and never answers for one the schema would tell apart."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import ValidationError

from tests.support.acp_schema import validate

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

"""The ACP v2 (draft) side of ``tests.support.acp_schema``: v2 conversations validate, v1 shapes don't.

The schemas are the copies in ``tests/schemas/acp/v2/`` (see ``tests/schemas/SOURCE.md``).
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import ValidationError

from tests.support.acp_schema import ConversationValidator, definition, validate

# Pure schema checks: well under a second; the bound only turns a hang into a failure.
pytestmark = pytest.mark.timeout(30)

SESSION = "sess_v2_1"


def response(rid: int, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def update(body: dict[str, Any], session: str = SESSION) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session, "update": body},
    }


def prompting() -> ConversationValidator:
    """A v2 validator that has seen the client send ``session/prompt`` with id 3."""
    validator = ConversationValidator(version=2, unstable=True)
    validator.client_sent(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": SESSION, "prompt": [{"type": "text", "text": "hi"}]},
        }
    )
    return validator


@pytest.mark.parametrize(
    ("method", "side", "suffix", "name"),
    [
        ("session/prompt", "agent", "Response", "PromptResponse"),
        ("session/update", "client", "Notification", "UpdateSessionNotification"),
        ("session/request_permission", "client", "Request", "RequestPermissionRequest"),
        ("session/resume", "agent", "Request", "ResumeSessionRequest"),
        ("session/resume", "agent", "Response", "ResumeSessionResponse"),
        ("session/status", "agent", "Response", "SessionStatusResponse"),
        ("session/set_title", "agent", "Response", "SetSessionTitleResponse"),
        ("session/archive", "agent", "Response", "ArchiveSessionResponse"),
        ("session/cancel", "agent", "Notification", "CancelSessionNotification"),
    ],
)
def test_v2_definitions_are_found_by_method_and_side(
    method: str, side: str, suffix: str, name: str
) -> None:
    assert definition(method, side, suffix, version=2, unstable=True) == name


def test_unstable_only_methods_are_absent_from_the_stable_v2_schema() -> None:
    with pytest.raises(KeyError):
        definition("session/status", "agent", "Response", version=2, unstable=False)


def test_v1_stays_the_default() -> None:
    validator = ConversationValidator()
    assert validator.version == 1
    assert definition("session/update", "client", "Notification") == "SessionNotification"


def test_a_v2_state_update_validates() -> None:
    validator = ConversationValidator(version=2, unstable=True)
    validator.agent_sent(update({"sessionUpdate": "state_update", "state": "running"}))
    validator.agent_sent(
        update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    )


def test_a_v2_prompt_response_validates() -> None:
    prompting().agent_sent(response(3, {"messageId": "m1"}))


def test_a_v2_permission_request_validates() -> None:
    ConversationValidator(version=2, unstable=True).agent_sent(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "session/request_permission",
            "params": {
                "sessionId": SESSION,
                "title": "Run `ls`?",
                "options": [
                    {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ],
            },
        }
    )


def test_a_v1_prompt_response_is_rejected() -> None:
    with pytest.raises(ValidationError):
        prompting().agent_sent(response(3, {"stopReason": "end_turn"}))


def test_a_v1_tool_call_update_is_rejected() -> None:
    tool_call = {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_1",
        "title": "ls",
        "kind": "execute",
        "status": "pending",
    }
    with pytest.raises(ValidationError):
        ConversationValidator(version=2, unstable=True).agent_sent(update(tool_call))
    # The published schema, read verbatim, lets it through its open ``other`` variant:
    # that is why the v2 validator closes the unions by default.
    validate(
        "UpdateSessionNotification",
        update(tool_call)["params"],
        unstable=True,
        version=2,
        future_variants=True,
    )


def test_underscore_extensions_stay_valid_in_v2() -> None:
    validator = ConversationValidator(version=2, unstable=True)
    validator.agent_sent(update({"sessionUpdate": "_codex/extra", "anything": 1}))
    with pytest.raises(ValidationError):
        validator.agent_sent(
            update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "done"})
        )

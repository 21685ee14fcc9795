"""Approvals and questions in the engine alone: Codex server requests → ACP requests, and back.

Every test also holds the engine to the rule the feature exists for: each Codex request is
answered exactly once (``codex_answers`` fails on a second answer).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.engine.core import turns
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness

THREAD = "thread-1"
TURN = "turn-1"

COMMAND_APPROVAL: dict[str, Any] = {
    "kind": "command",
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_1",
    "startedAtMs": 1,
    "reason": "test",
    "command": "/bin/bash -lc 'touch approved.txt'",
    "cwd": "/work",
    "commandActions": [{"type": "unknown", "command": "touch approved.txt"}],
    "proposedExecpolicyAmendment": ["touch", "approved.txt"],
    "availableDecisions": [
        "accept",
        {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "approved.txt"]}},
        "cancel",
    ],
}
FORM = {"elicitation": {"form": {}}}


# -- helpers ------------------------------------------------------------------------------


def harness(capabilities: dict[str, Any] | None = None) -> tuple[Harness, int]:
    """An initialized engine with a session and a prompt whose turn is ``turn-1``."""
    h = Harness()
    params: dict[str, Any] = {"protocolVersion": 1}
    if capabilities is not None:
        params["clientCapabilities"] = capabilities
    h.client_request("initialize", params)
    sid = h.new_session(THREAD)
    return h, h.start_prompt(sid)


def codex_asks(h: Harness, rid: int, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    message = {"id": rid, "method": method, "params": params}
    return h._collect(h.engine.receive_codex(msgspec.json.encode(message)))


def asked(h: Harness, method: str = "session/request_permission") -> dict[str, Any]:
    """The last request the engine sent the client with this method."""
    found = [m for m in h.to_client if m.get("method") == method and "id" in m]
    assert found, f"the client was not asked {method}"
    return found[-1]


def client_answers(h: Harness, rid: Any, result: Any) -> list[dict[str, Any]]:
    message = {"jsonrpc": "2.0", "id": rid, "result": result}
    return h.client_raw(msgspec.json.encode(message))


def pick(h: Harness, option_id: str) -> list[dict[str, Any]]:
    request = asked(h)
    return client_answers(
        h, request["id"], {"outcome": {"outcome": "selected", "optionId": option_id}}
    )


def codex_answers(h: Harness, rid: int) -> list[dict[str, Any]]:
    """Every answer the engine sent Codex for its request ``rid`` (at most one, always)."""
    answers = [m for m in h.to_codex if m.get("id") == rid and "method" not in m]
    assert len(answers) <= 1, f"Codex request {rid} answered {len(answers)} times: {answers}"
    return answers


def codex_answer(h: Harness, rid: int) -> Any:
    [answer] = codex_answers(h, rid)
    return answer.get("result", answer.get("error"))


def withdrawn(h: Harness) -> list[Any]:
    return [m["params"]["requestId"] for m in h.to_client if m.get("method") == "$/cancel_request"]


def assert_valid_acp(h: Harness, *, unstable: bool = False) -> None:
    """Every request and notification the engine sent the client is valid ACP."""
    validator = ConversationValidator(unstable=unstable)
    for message in h.to_client:
        if "method" in message:
            validator.agent_sent(message)


# -- command approvals ------------------------------------------------------------------------


def command_asked(rid: int) -> tuple[Harness, int, Any]:
    """A prompt whose command Codex asks to approve (its request ``rid``): the harness, the
    prompt's id, and the permission request the client was sent."""
    h, prompt = harness()
    codex_asks(h, rid, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    return h, prompt, asked(h)["id"]


def test_a_command_approval_asks_permission_naming_the_tool_call_with_every_option() -> None:
    h, _ = harness()
    assert codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    request = asked(h)
    params = request["params"]
    assert params["sessionId"] == THREAD
    assert params["toolCall"] == {
        "toolCallId": "call_1",
        "title": "touch approved.txt",
        "kind": "execute",
        "status": "pending",
        "rawInput": {
            "command": "/bin/bash -lc 'touch approved.txt'",
            "cwd": "/work",
            "commandActions": [{"type": "unknown", "command": "touch approved.txt"}],
            "reason": "test",
        },
    }
    assert [(o["optionId"], o["kind"]) for o in params["options"]] == [
        ("allow_once", "allow_once"),
        ("allow_session", "allow_always"),
        ("allow_prefix", "allow_always"),
        ("reject_once", "reject_once"),
    ]
    assert "`touch approved.txt`" in params["options"][2]["name"]
    assert codex_answers(h, 0) == []  # Codex waits for the user
    assert_valid_acp(h)


@pytest.mark.parametrize(
    ("outcome", "decision"),
    [
        ({"outcome": "selected", "optionId": "allow_once"}, "accept"),
        ({"outcome": "selected", "optionId": "allow_session"}, "acceptForSession"),
        (
            {"outcome": "selected", "optionId": "allow_prefix"},
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "approved.txt"]}},
        ),
        ({"outcome": "selected", "optionId": "reject_once"}, "decline"),
        ({"outcome": "cancelled"}, "cancel"),
    ],
)
def test_each_command_option_answers_codex_with_its_decision(
    outcome: dict[str, Any], decision: Any
) -> None:
    h, _ = harness()
    codex_asks(h, 7, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    client_answers(h, asked(h)["id"], {"outcome": outcome})
    assert codex_answer(h, 7) == {"decision": decision}
    assert withdrawn(h) == []


def test_without_a_proposed_prefix_or_for_a_checkpoint_fewer_options_are_offered() -> None:
    h, _ = harness()
    plain = {**COMMAND_APPROVAL, "proposedExecpolicyAmendment": None, "availableDecisions": None}
    codex_asks(h, 1, "item/commandExecution/requestApproval", plain)
    ids = [o["optionId"] for o in asked(h)["params"]["options"]]
    assert ids == ["allow_once", "allow_session", "reject_once"]

    # Codex proposes a prefix but does not offer the amendment: not offered either.
    not_offered = {**COMMAND_APPROVAL, "availableDecisions": ["accept", "cancel"]}
    codex_asks(h, 2, "item/commandExecution/requestApproval", not_offered)
    assert "allow_prefix" not in [o["optionId"] for o in asked(h)["params"]["options"]]

    checkpoint = {**COMMAND_APPROVAL, "kind": "humanCommand"}
    codex_asks(h, 3, "item/commandExecution/requestApproval", checkpoint)
    ids = [o["optionId"] for o in asked(h)["params"]["options"]]
    assert ids == ["allow_once", "reject_once"]
    assert_valid_acp(h)


def test_network_policy_amendments_are_offered_as_remembered_choices() -> None:
    h, _ = harness()
    network = {
        **COMMAND_APPROVAL,
        "proposedExecpolicyAmendment": None,
        "networkApprovalContext": {"host": "example.com", "protocol": "https"},
        "proposedNetworkPolicyAmendments": [
            {"action": "allow", "host": "example.com"},
            {"action": "deny", "host": "example.com"},
        ],
    }
    codex_asks(h, 4, "item/commandExecution/requestApproval", network)
    params = asked(h)["params"]
    assert "network access to example.com" in params["toolCall"]["title"]
    options = {o["optionId"]: o for o in params["options"]}
    assert options["network_allow_0"]["kind"] == "allow_always"
    assert options["network_deny_1"]["kind"] == "reject_always"
    pick(h, "network_deny_1")
    assert codex_answer(h, 4) == {
        "decision": {
            "applyNetworkPolicyAmendment": {
                "network_policy_amendment": {"action": "deny", "host": "example.com"}
            }
        }
    }
    assert_valid_acp(h)


@pytest.mark.parametrize(
    ("command", "actions", "title", "kind"),
    [
        ("/bin/bash -lc 'ls -la'", None, "ls -la", "execute"),
        (
            "/bin/zsh -lc 'cat a.txt'",
            [{"type": "read", "command": "cat a.txt", "name": "a.txt", "path": "a.txt"}],
            "cat a.txt",
            "execute",  # asked to run beyond the sandbox: see tests/test_command_kinds.py
        ),
        (
            "bash -lc 'rg foo && ls'",
            [{"type": "search", "command": "rg foo"}, {"type": "listFiles", "command": "ls"}],
            "rg foo && ls",
            "execute",
        ),
        ("make test", None, "make test", "execute"),
        (None, None, "Run a command", "execute"),
    ],
)
def test_command_titles_drop_the_shell_wrapper_and_kinds_never_understate(
    command: str | None, actions: Any, title: str, kind: str
) -> None:
    h, _ = harness()
    params = {**COMMAND_APPROVAL, "command": command, "commandActions": actions}
    codex_asks(h, 5, "item/commandExecution/requestApproval", params)
    tool_call = asked(h)["params"]["toolCall"]
    assert (tool_call["title"], tool_call["kind"]) == (title, kind)


# -- file changes and permissions ------------------------------------------------------------


def test_a_file_change_approval_names_the_files_the_item_announced() -> None:
    h, _ = harness()
    h.codex_notify(
        "item/started",
        {
            "threadId": THREAD,
            "turnId": TURN,
            "item": {
                "type": "fileChange",
                "id": "call_patch",
                "status": "inProgress",
                "changes": [
                    {"path": "/work/.git/note.txt", "kind": {"type": "add"}, "diff": "hi\n"}
                ],
            },
        },
    )
    params = {"threadId": THREAD, "turnId": TURN, "itemId": "call_patch", "reason": None}
    codex_asks(h, 3, "item/fileChange/requestApproval", params)
    request = asked(h)["params"]
    assert request["toolCall"]["toolCallId"] == "call_patch"
    assert request["toolCall"]["title"] == "Create .git/note.txt"
    assert request["toolCall"]["kind"] == "edit"
    assert request["toolCall"]["locations"] == [{"path": "/work/.git/note.txt"}]
    assert [o["optionId"] for o in request["options"]] == [
        "allow_once",
        "allow_session",
        "reject_once",
    ]
    pick(h, "allow_session")
    assert codex_answer(h, 3) == {"decision": "acceptForSession"}
    assert_valid_acp(h)


def test_approvals_for_items_the_bridge_never_saw_still_ask() -> None:
    h, _ = harness()
    params = {"threadId": THREAD, "turnId": TURN, "itemId": "never-seen", "grantRoot": "/work"}
    codex_asks(h, 1, "item/fileChange/requestApproval", params)
    tool_call = asked(h)["params"]["toolCall"]
    assert tool_call["toolCallId"] == "never-seen"
    assert tool_call["title"] == "Apply a patch"
    pick(h, "reject_once")
    assert codex_answer(h, 1) == {"decision": "decline"}

    codex_asks(h, 2, "item/commandExecution/requestApproval", {**COMMAND_APPROVAL, "itemId": "x"})
    assert asked(h)["params"]["toolCall"]["title"] == "touch approved.txt"
    assert_valid_acp(h)


PERMISSIONS: dict[str, Any] = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_perm",
    "cwd": "/work",
    "reason": "need it",
    "permissions": {
        "network": None,
        "fileSystem": {
            "read": None,
            "write": ["/outside"],
            "entries": [{"path": {"type": "path", "path": "/outside"}, "access": "write"}],
        },
    },
}


@pytest.mark.parametrize(
    ("option", "answer", "status"),
    [
        ("allow_once", {"permissions": PERMISSIONS["permissions"], "scope": "turn"}, "completed"),
        (
            "allow_session",
            {"permissions": PERMISSIONS["permissions"], "scope": "session"},
            "completed",
        ),
        ("reject_once", {"permissions": {}}, "failed"),
    ],
)
def test_a_permissions_request_grants_what_was_asked_for_the_turn_or_session_or_nothing(
    option: str, answer: dict[str, Any], status: str
) -> None:
    h, _ = harness()
    codex_asks(h, 9, "item/permissions/requestApproval", PERMISSIONS)
    request = asked(h)["params"]
    assert request["toolCall"]["title"] == "Grant write access to /outside"
    assert [o["optionId"] for o in request["options"]] == [
        "allow_once",
        "allow_session",
        "reject_once",
    ]
    pick(h, option)
    assert codex_answer(h, 9) == answer
    # No Codex item exists for a permission request: its tool call is closed here.
    assert h.updates(THREAD)[-1] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_perm",
        "status": status,
    }
    assert_valid_acp(h)


# -- exactly once ------------------------------------------------------------------------------


def test_a_late_answer_to_a_permissions_request_changes_nothing() -> None:
    h, _ = harness()
    codex_asks(h, 9, "item/permissions/requestApproval", PERMISSIONS)
    permission = asked(h)["id"]
    h.complete_turn(THREAD, status="interrupted")
    updates = len(h.updates(THREAD))
    client_answers(h, permission, {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    assert codex_answer(h, 9) == {"permissions": {}}
    assert len(h.updates(THREAD)) == updates  # no tool call status from a dropped answer


def test_session_cancel_answers_codex_cancel_at_once_and_the_late_answer_changes_nothing() -> None:
    h, prompt, permission = command_asked(0)
    h.client_notify("session/cancel", {"sessionId": THREAD})
    assert h.codex_request("turn/interrupt")["params"]["turnId"] == TURN
    assert codex_answer(h, 0) == {"decision": "cancel"}
    # The client answers late with an allow: nothing reaches Codex.
    client_answers(h, permission, {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    assert codex_answer(h, 0) == {"decision": "cancel"}
    h.codex_notify("serverRequest/resolved", {"threadId": THREAD, "requestId": 0})
    h.complete_turn(THREAD, status="interrupted")
    assert h.result(prompt) == {"stopReason": "cancelled"}
    assert codex_answer(h, 0) == {"decision": "cancel"}
    assert withdrawn(h) == []  # the client answers its own requests after session/cancel


def test_a_question_arriving_after_the_cancel_is_cancelled_without_asking() -> None:
    h, _ = harness()
    h.client_notify("session/cancel", {"sessionId": THREAD})
    codex_asks(h, 4, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    assert codex_answer(h, 4) == {"decision": "cancel"}
    assert not [m for m in h.to_client if m.get("method") == "session/request_permission"]


def test_an_answer_given_while_the_turn_is_being_cancelled_authorizes_nothing() -> None:
    # Any path that cancels the prompt (session/close does it without session/cancel).
    h, _ = harness()
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    record = h.engine.threads.session(THREAD)
    assert record is not None and record.turn is not None
    assert turns.cancel(record.turn)
    pick(h, "allow_once")
    assert codex_answer(h, 0) == {"decision": "cancel"}


def test_a_turn_that_ends_withdraws_the_question_and_answers_codex_once() -> None:
    h, prompt, permission = command_asked(2)
    h.complete_turn(THREAD, status="interrupted")
    assert codex_answer(h, 2) == {"decision": "cancel"}
    assert withdrawn(h) == [permission]
    h.codex_notify("serverRequest/resolved", {"threadId": THREAD, "requestId": 2})
    client_answers(h, permission, {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    assert codex_answer(h, 2) == {"decision": "cancel"}
    assert h.result(prompt) == {"stopReason": "cancelled"}
    assert_valid_acp(h)


def test_codex_resolving_a_request_itself_withdraws_it_without_an_answer() -> None:
    h, _, permission = command_asked(3)
    h.codex_notify("serverRequest/resolved", {"threadId": THREAD, "requestId": 3})
    assert codex_answers(h, 3) == []  # Codex no longer waits: nothing to answer
    assert withdrawn(h) == [permission]
    pick(h, "allow_once")
    assert codex_answers(h, 3) == []


def test_a_closed_session_answers_its_questions_cancel() -> None:
    h, _, permission = command_asked(5)
    h.engine.forget(THREAD)  # what session/close does once the prompt has settled
    h._collect(h.engine.hub.take())
    assert codex_answer(h, 5) == {"decision": "cancel"}
    assert permission in withdrawn(h)
    pick(h, "allow_once")
    assert codex_answer(h, 5) == {"decision": "cancel"}


def test_losing_codex_withdraws_open_questions() -> None:
    h, _, permission = command_asked(6)
    h._collect(h.engine.codex_lost("Codex app-server exited with status 1"))
    assert withdrawn(h) == [permission]
    pick(h, "allow_once")  # dropped: no Codex to tell, and no error
    assert codex_answers(h, 6) == []


def test_a_lost_client_leaves_no_codex_request_waiting() -> None:
    h, _ = harness(FORM)
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    question = {
        "threadId": THREAD,
        "turnId": TURN,
        "itemId": "q",
        "questions": [{"id": "color", "header": "Color", "question": "Which?", "options": None}],
    }
    codex_asks(h, 1, "item/tool/requestUserInput", question)
    h._collect(h.engine.client_lost())
    assert codex_answer(h, 0) == {"decision": "cancel"}
    assert codex_answer(h, 1) == {"answers": {}}
    # Codex asks again after the client left: answered at once.
    codex_asks(h, 2, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    assert codex_answer(h, 2) == {"decision": "cancel"}


def test_a_duplicate_client_answer_is_dropped() -> None:
    h, _ = harness()
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    pick(h, "reject_once")
    pick(h, "allow_once")  # the same request id again: logged and dropped by the peer
    assert codex_answer(h, 0) == {"decision": "decline"}


def test_a_re_sent_request_is_not_asked_twice() -> None:
    h, _ = harness()
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    assert len([m for m in h.to_client if m.get("method") == "session/request_permission"]) == 1
    pick(h, "allow_once")
    assert codex_answer(h, 0) == {"decision": "accept"}


# -- bad answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "result",
    [
        {"outcome": {"outcome": "selected", "optionId": "allow_everything_forever"}},
        {"outcome": {"outcome": "selected"}},
        {"outcome": {"outcome": "maybe"}},
        {"outcome": "yes"},
        {"nothing": True},
    ],
)
def test_an_option_not_offered_or_a_malformed_answer_declines(result: Any) -> None:
    h, prompt = harness()
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    client_answers(h, asked(h)["id"], result)
    assert codex_answer(h, 0) == {"decision": "decline"}
    # The session keeps working.
    h.complete_turn(THREAD)
    assert h.result(prompt) == {"stopReason": "end_turn"}


def test_a_client_error_reply_declines() -> None:
    h, _ = harness()
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    error = {"jsonrpc": "2.0", "id": asked(h)["id"], "error": {"code": -32601, "message": "no"}}
    h.client_raw(msgspec.json.encode(error))
    assert codex_answer(h, 0) == {"decision": "decline"}


def test_a_question_for_another_clients_thread_is_left_to_that_client() -> None:
    h, _ = harness()
    codex_asks(h, 0, "item/commandExecution/requestApproval", {**COMMAND_APPROVAL, "threadId": "x"})
    # HeldMessage while the bridge reads the thread to learn whether it is a sub-agent of ours.
    assert codex_answers(h, 0) == []
    read = h.codex_request("thread/read")
    assert read["params"]["threadId"] == "x"
    h.codex_reply(read["id"], {"thread": {"id": "x", "parentThreadId": None}})
    # Not ours (Codex sends every connection every thread's questions): the client
    # that owns the thread answers it; an answer from here would pre-empt it.
    assert codex_answers(h, 0) == []
    assert not [m for m in h.to_client if m.get("method") == "session/request_permission"]


def test_malformed_request_params_are_an_error_reply_to_codex() -> None:
    h, _ = harness()
    codex_asks(h, 0, "item/commandExecution/requestApproval", {"threadId": THREAD})
    assert codex_answer(h, 0)["code"] == -32602


def test_legacy_approval_requests_are_declined_with_a_clear_error() -> None:
    h, _ = harness()
    codex_asks(h, 0, "execCommandApproval", {"conversationId": THREAD, "callId": "c"})
    codex_asks(h, 1, "applyPatchApproval", {"conversationId": THREAD, "callId": "c"})
    assert "legacy approval" in codex_answer(h, 0)["message"]
    assert "legacy approval" in codex_answer(h, 1)["message"]


# -- questions ---------------------------------------------------------------------------------

QUESTION: dict[str, Any] = {
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_q",
    "isBlocking": False,
    "questions": [
        {
            "id": "color",
            "header": "Color",
            "question": "Which color?",
            "isOther": True,
            "isSecret": False,
            "options": [
                {"label": "Red", "description": "warm"},
                {"label": "Blue", "description": "cool"},
            ],
        },
        {"id": "name", "header": "Name", "question": "Your name?", "options": None},
    ],
}


def test_questions_without_the_elicitation_capability_get_no_answers_at_once() -> None:
    h, _ = harness()
    codex_asks(h, 0, "item/tool/requestUserInput", QUESTION)
    assert codex_answer(h, 0) == {"answers": {}}
    assert not [m for m in h.to_client if "id" in m and m.get("method")]


def test_questions_become_an_elicitation_form_and_the_answers_come_back() -> None:
    h, _ = harness(FORM)
    codex_asks(h, 0, "item/tool/requestUserInput", QUESTION)
    request = asked(h, "elicitation/create")
    params = request["params"]
    assert params["sessionId"] == THREAD and params["mode"] == "form"
    assert params["message"] == "Codex has 2 questions"
    schema = params["requestedSchema"]
    assert schema["properties"]["color"] == {
        "type": "string",
        "title": "Color",
        "description": "Which color?",
        "oneOf": [
            {"const": "Red", "title": "Red", "description": "warm"},
            {"const": "Blue", "title": "Blue", "description": "cool"},
        ],
    }
    assert schema["properties"]["color_other"]["type"] == "string"
    assert schema["properties"]["name"] == {
        "type": "string",
        "title": "Name",
        "description": "Your name?",
    }
    assert schema["required"] == ["name"]
    assert_valid_acp(h, unstable=True)
    assert_valid_acp(h)

    content = {"color": "Blue", "color_other": "teal, really", "name": "Ada"}
    client_answers(h, request["id"], {"action": "accept", "content": content})
    assert codex_answer(h, 0) == {
        "answers": {
            "color": {"answers": ["Blue", "teal, really"]},
            "name": {"answers": ["Ada"]},
        }
    }


@pytest.mark.parametrize(
    "result",
    [
        {"action": "decline"},
        {"action": "cancel"},
        {"action": "accept", "content": None},
        {"action": "_later"},
        {"content": {"color": "Red"}},
        {"action": "accept", "content": {"color": 5, "name": ""}},
    ],
)
def test_declined_cancelled_or_unusable_forms_answer_no_answers(result: Any) -> None:
    h, _ = harness(FORM)
    codex_asks(h, 0, "item/tool/requestUserInput", QUESTION)
    client_answers(h, asked(h, "elicitation/create")["id"], result)
    answer = codex_answer(h, 0)
    if result.get("content") and result["content"].get("color") == 5:
        assert answer == {"answers": {"color": {"answers": ["5"]}}}
    else:
        assert answer == {"answers": {}}


def test_a_form_capability_of_null_is_no_capability() -> None:
    h, _ = harness({"elicitation": {"form": None, "url": {}}})
    codex_asks(h, 0, "item/tool/requestUserInput", QUESTION)
    assert codex_answer(h, 0) == {"answers": {}}


def test_a_question_open_when_the_user_cancels_gets_no_answers() -> None:
    h, _ = harness(FORM)
    codex_asks(h, 0, "item/tool/requestUserInput", QUESTION)
    h.client_notify("session/cancel", {"sessionId": THREAD})
    assert codex_answer(h, 0) == {"answers": {}}


# -- MCP elicitations ------------------------------------------------------------------------

MCP_TOOL_APPROVAL: dict[str, Any] = {
    "threadId": THREAD,
    "turnId": TURN,
    "serverName": "testmcp",
    "mode": "form",
    "_meta": {
        "codex_approval_kind": "mcp_tool_call",
        "persist": ["session", "always"],
        "tool_name": "echo",
        "tool_description": "Echo the text back.",
        "tool_params": {"text": "hello"},
    },
    "message": 'Allow the testmcp MCP server to run tool "echo"?',
    "requestedSchema": {"type": "object", "properties": {}},
}


@pytest.mark.parametrize(
    ("outcome", "answer"),
    [
        ({"outcome": "selected", "optionId": "allow_once"}, {"action": "accept", "content": None}),
        (
            {"outcome": "selected", "optionId": "allow_session"},
            {"action": "accept", "content": None, "_meta": {"persist": "session"}},
        ),
        (
            {"outcome": "selected", "optionId": "allow_always"},
            {"action": "accept", "content": None, "_meta": {"persist": "always"}},
        ),
        ({"outcome": "selected", "optionId": "reject_once"}, {"action": "decline"}),
        ({"outcome": "cancelled"}, {"action": "cancel"}),
    ],
)
def test_an_mcp_tool_approval_is_a_permission_request_on_the_tool_call(
    outcome: dict[str, Any], answer: dict[str, Any]
) -> None:
    h, _ = harness(FORM)  # a permission, even for a client that could show a form
    h.codex_notify(
        "item/started",
        {
            "threadId": THREAD,
            "turnId": TURN,
            "item": {"type": "mcpToolCall", "id": "call_mcp", "server": "testmcp", "tool": "echo"},
        },
    )
    codex_asks(h, 0, "mcpServer/elicitation/request", MCP_TOOL_APPROVAL)
    params = asked(h)["params"]
    assert params["toolCall"]["toolCallId"] == "call_mcp"
    assert params["toolCall"]["title"] == "testmcp: echo"
    assert params["toolCall"]["rawInput"] == {"text": "hello"}
    assert [o["optionId"] for o in params["options"]] == [
        "allow_once",
        "allow_session",
        "allow_always",
        "reject_once",
    ]
    client_answers(h, asked(h)["id"], {"outcome": outcome})
    assert codex_answer(h, 0) == answer
    assert_valid_acp(h)


def test_an_mcp_tool_approval_offers_only_the_remembering_codex_allows() -> None:
    h, _ = harness()
    meta = {**MCP_TOOL_APPROVAL["_meta"], "persist": []}
    codex_asks(h, 0, "mcpServer/elicitation/request", {**MCP_TOOL_APPROVAL, "_meta": meta})
    params = asked(h)["params"]
    assert [o["optionId"] for o in params["options"]] == ["allow_once", "reject_once"]
    assert params["toolCall"]["toolCallId"] == "mcp-approval-0"  # no tool call was announced


MCP_FORM: dict[str, Any] = {
    "threadId": THREAD,
    "turnId": None,
    "serverName": "docs",
    "mode": "form",
    "message": "Which project?",
    "requestedSchema": {
        "type": "object",
        "properties": {"project": {"type": "string", "title": "Project"}},
        "required": ["project"],
    },
}


def test_an_mcp_form_elicitation_is_passed_to_a_client_that_can_show_it() -> None:
    h, _ = harness(FORM)
    codex_asks(h, 0, "mcpServer/elicitation/request", MCP_FORM)
    request = asked(h, "elicitation/create")
    assert request["params"] == {
        "sessionId": THREAD,
        "mode": "form",
        "message": "Which project?",
        "requestedSchema": MCP_FORM["requestedSchema"],
    }
    assert_valid_acp(h, unstable=True)
    client_answers(h, request["id"], {"action": "accept", "content": {"project": "bridge"}})
    assert codex_answer(h, 0) == {"action": "accept", "content": {"project": "bridge"}}


def test_an_mcp_elicitation_the_client_cannot_show_is_declined() -> None:
    h, _ = harness()
    codex_asks(h, 0, "mcpServer/elicitation/request", MCP_FORM)
    url = {
        **MCP_FORM,
        "mode": "url",
        "url": "https://example.com/login",
        "elicitationId": "e1",
    }
    codex_asks(h, 1, "mcpServer/elicitation/request", url)
    assert codex_answer(h, 0) == {"action": "decline"}
    assert codex_answer(h, 1) == {"action": "decline"}
    assert not [m for m in h.to_client if m.get("method") == "elicitation/create"]


def test_an_mcp_url_elicitation_goes_to_a_client_with_the_url_capability() -> None:
    h, _ = harness({"elicitation": {"url": {}}})
    url = {**MCP_FORM, "mode": "url", "url": "https://example.com/login", "elicitationId": "e1"}
    codex_asks(h, 0, "mcpServer/elicitation/request", url)
    request = asked(h, "elicitation/create")
    assert request["params"]["mode"] == "url"
    assert request["params"]["url"] == "https://example.com/login"
    assert_valid_acp(h, unstable=True)
    client_answers(h, request["id"], {"action": "cancel"})
    assert codex_answer(h, 0) == {"action": "cancel"}


def test_an_mcp_elicitation_without_a_turn_waits_past_turn_end_until_resolved() -> None:
    h, _ = harness(FORM)
    codex_asks(h, 0, "mcpServer/elicitation/request", MCP_FORM)
    request = asked(h, "elicitation/create")
    h.complete_turn(THREAD)
    assert codex_answers(h, 0) == []
    h.codex_notify("serverRequest/resolved", {"threadId": THREAD, "requestId": 0})
    assert withdrawn(h) == [request["id"]]
    assert_valid_acp(h, unstable=True)


@pytest.mark.parametrize("mode", ["form", "url"])
def test_an_mcp_elicitation_from_an_environment_names_it_and_is_answered_as_before(
    mode: str,
) -> None:
    h, _ = harness({"elicitation": {"form": {}, "url": {}}})
    params = {**MCP_FORM, "environmentId": "env-remote-1"}
    if mode == "url":
        params.update(mode="url", url="https://example.com/login", elicitationId="e1")
    codex_asks(h, 0, "mcpServer/elicitation/request", params)
    request = asked(h, "elicitation/create")
    assert request["params"]["_meta"] == {
        "mcpServer": MCP_FORM["serverName"],
        "environmentId": "env-remote-1",
    }
    assert_valid_acp(h, unstable=True)
    client_answers(h, request["id"], {"action": "decline"})
    # Codex's answer has no environmentId: the request id says which question it answers.
    assert codex_answer(h, 0) == {"action": "decline"}


def test_an_mcp_tool_approval_from_an_environment_names_it_on_the_permission_request() -> None:
    h, _ = harness(FORM)
    codex_asks(
        h, 0, "mcpServer/elicitation/request", {**MCP_TOOL_APPROVAL, "environmentId": "env-2"}
    )
    request = asked(h)
    assert request["method"] == "session/request_permission"
    assert request["params"]["_meta"] == {"mcpServer": "testmcp", "environmentId": "env-2"}
    assert_valid_acp(h)
    client_answers(h, request["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    assert codex_answer(h, 0) == {"action": "accept", "content": None}


def test_an_mcp_elicitation_naming_no_environment_asks_as_before() -> None:
    h, _ = harness(FORM)
    codex_asks(h, 0, "mcpServer/elicitation/request", {**MCP_TOOL_APPROVAL, "environmentId": None})
    codex_asks(h, 1, "mcpServer/elicitation/request", {**MCP_FORM, "environmentId": None})
    assert [m for m in h.to_client if "_meta" in m.get("params", {})] == []

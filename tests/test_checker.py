"""The RFD transcript checker, rule by rule: a conversation that keeps the rule, and ones that break it.

Each case is a minimal ACP conversation, a list of ``("client" | "agent", message)``
in the order the two peers sent them, fed to :class:`TranscriptChecker` the way
the replay feeds it: agent messages are numbered from 1 (the transcript line),
and a client message is checked with the number of the agent message it follows.
A violating case names the line of its first violating message and words that
``Violation.why`` must contain; the test also proves nothing before that line
was flagged (the violation is raised *at* that message, not earlier or later).

Every message in the table (but the one case about a subagent_update without
its child id) is schema-valid ACP, checked below against the official unstable
schema: the violations are protocol-order violations, not malformed shapes
that any validator would catch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from bridge.recording.checker import TranscriptChecker, Violation
from tests.support.acp_schema import ConversationValidator, _definition, validate

Message = dict[str, Any]
Conversation = list[tuple[str, Message]]

ROOT = "sess_root"
ROOT_2 = "sess_other_root"
CHILD = "sess_child_1"
GRANDCHILD = "sess_grandchild_1"
STRANGER = "sess_never_announced"

# -- realistic ACP messages ------------------------------------------------------------------


def client_request(rid: int, method: str, params: Message) -> tuple[str, Message]:
    return ("client", {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def new_session(rid: int) -> tuple[str, Message]:
    return client_request(rid, "session/new", {"cwd": "/work/project", "mcpServers": []})


def new_session_result(rid: int, session: str) -> tuple[str, Message]:
    return ("agent", {"jsonrpc": "2.0", "id": rid, "result": {"sessionId": session}})


def load_session(rid: int, session: str) -> tuple[str, Message]:
    params = {"sessionId": session, "cwd": "/work/project", "mcpServers": []}
    return client_request(rid, "session/load", params)


def load_result(rid: int) -> tuple[str, Message]:
    return ("agent", {"jsonrpc": "2.0", "id": rid, "result": {}})


def load_error(rid: int, session: str) -> tuple[str, Message]:
    error = {
        "code": -32002,
        "message": f"Session not found: {session}",
        "data": {"sessionId": session},
    }
    return ("agent", {"jsonrpc": "2.0", "id": rid, "error": error})


def session_update(session: str, update: Message) -> tuple[str, Message]:
    params = {"sessionId": session, "update": update}
    return ("agent", {"jsonrpc": "2.0", "method": "session/update", "params": params})


def agent_chunk(session: str, text: str = "hello") -> tuple[str, Message]:
    content = {"type": "text", "text": text}
    return session_update(session, {"sessionUpdate": "agent_message_chunk", "content": content})


def user_chunk(
    session: str, text: str = "earlier question", message_id: str | None = None
) -> tuple[str, Message]:
    content = {"type": "text", "text": text}
    update: Message = {"sessionUpdate": "user_message_chunk", "content": content}
    if message_id is not None:
        update["messageId"] = message_id
    return session_update(session, update)


def subagent_update(parent: str, child: str, **fields: Any) -> tuple[str, Message]:
    update = {"sessionUpdate": "subagent_update", "sessionId": child, **fields}
    return session_update(parent, update)


def session_message(
    session: str, *, sender: str | None = None, recipient: str | None = None
) -> tuple[str, Message]:
    update: Message = {
        "sessionUpdate": "session_message",
        "messageId": "msg_1",
        "content": [{"type": "text", "text": "please look at the tests"}],
    }
    if sender is not None:
        update["senderSessionId"] = sender
    if recipient is not None:
        update["recipientSessionId"] = recipient
    return session_update(session, update)


def session_message_chunk(session: str) -> tuple[str, Message]:
    update = {
        "sessionUpdate": "session_message_chunk",
        "messageId": "msg_1",
        "content": {"type": "text", "text": "please "},
    }
    return session_update(session, update)


def permission_request(rid: int, session: str) -> tuple[str, Message]:
    params = {
        "sessionId": session,
        "toolCall": {"toolCallId": "call_1", "title": "rm -rf build", "kind": "execute"},
        "options": [
            {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }
    return (
        "agent",
        {"jsonrpc": "2.0", "id": rid, "method": "session/request_permission", "params": params},
    )


def tool_call(session: str, tool_call_id: str = "call_1") -> tuple[str, Message]:
    return session_update(
        session,
        {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": "rm -rf build",
            "kind": "execute",
            "status": "pending",
        },
    )


def tool_call_update(session: str, tool_call_id: str = "call_1") -> tuple[str, Message]:
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": tool_call_id,
        "status": "completed",
    }
    return session_update(session, update)


def permission_answer(rid: int, option: str = "allow") -> tuple[str, Message]:
    result = {"outcome": {"outcome": "selected", "optionId": option}}
    return ("client", {"jsonrpc": "2.0", "id": rid, "result": result})


def root(rid: int = 1, session: str = ROOT) -> Conversation:
    """A session/new and its answer: ``session`` is a known root."""
    return [new_session(rid), new_session_result(rid, session)]


def with_child(rid: int = 1) -> Conversation:
    return [*root(rid), subagent_update(ROOT, CHILD, title="Test investigator")]


# -- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    conversation: Conversation
    #: ``None``: the conversation keeps every rule; else (line, words ``why`` contains,
    #: or a tuple of acceptable alternatives).
    violation: tuple[int, str | tuple[str, ...]] | None = None
    subagents: bool = True
    #: False only for a case about a malformed message the schema refuses too.
    valid_acp: bool = True


def loaded_with_a_question() -> Conversation:
    """A session/load that replays one user message (``u-1``), and its answer."""
    return [
        load_session(1, ROOT),
        user_chunk(ROOT, "replayed question", message_id="u-1"),
        load_result(1),
    ]


def only_with_subagents(
    update: str, passing: Conversation, refused: tuple[Conversation, int]
) -> list[Case]:
    """``update`` passes in ``passing`` to a client that declared subagents; in ``refused``,
    to one that did not, it is a violation at the line given."""
    conversation, line = refused
    why = f"{update} sent to a client that did not declare subagents"
    return [
        Case(f"{update} to a client with subagents passes", passing, subagents=True),
        Case(f"{update} to a client without subagents", conversation, (line, why), subagents=False),
    ]


CASES = [
    # Rule 1: announcement before traffic.
    Case("root traffic after session/new passes", [*root(), agent_chunk(ROOT)]),
    Case(
        "traffic for a session nobody announced",
        [*root(), agent_chunk(ROOT), agent_chunk(STRANGER)],
        (3, f"{STRANGER!r} before any announcement"),
    ),
    Case(
        "traffic for the session before the session/new answer",
        [new_session(1), agent_chunk(ROOT), new_session_result(1, ROOT)],
        (1, f"{ROOT!r} before any announcement"),
    ),
    Case(
        "a permission request for an unannounced child",
        [*root(), permission_request(0, CHILD)],
        (2, f"session/request_permission for session {CHILD!r} before any announcement"),
    ),
    Case(
        "a subagent_update then the child's own traffic passes",
        [
            *with_child(),
            agent_chunk(CHILD),
            tool_call(CHILD),
            permission_request(0, CHILD),
            permission_answer(0),
        ],
    ),
    Case(
        "child traffic before its subagent_update",
        [*root(), agent_chunk(CHILD), subagent_update(ROOT, CHILD)],
        (2, f"{CHILD!r} before any announcement"),
    ),
    Case(
        "an announcement from a parent nobody announced",
        [*root(), subagent_update(CHILD, GRANDCHILD)],
        (2, f"session/update for session {CHILD!r} before any announcement"),
    ),
    Case(
        "a nested child announced under its own parent passes",
        [*with_child(), subagent_update(CHILD, GRANDCHILD), agent_chunk(GRANDCHILD)],
    ),
    Case(
        "a repeated announcement under the same parent (a metadata patch) passes",
        [*with_child(), subagent_update(ROOT, CHILD, title="renamed", description=None)],
    ),
    Case(
        "a nested child re-announced under the root: reparenting",
        [*with_child(), subagent_update(CHILD, GRANDCHILD), subagent_update(ROOT, GRANDCHILD)],
        (4, f"{GRANDCHILD!r} reparented from {CHILD!r} to {ROOT!r}"),
    ),
    Case(
        "a nested child first announced under the root, then under its real parent",
        [*with_child(), subagent_update(ROOT, GRANDCHILD), subagent_update(CHILD, GRANDCHILD)],
        (4, f"{GRANDCHILD!r} reparented from {ROOT!r} to {CHILD!r}"),
    ),
    Case(
        "a child moved to another root",
        [*with_child(), *root(2, ROOT_2), subagent_update(ROOT_2, CHILD)],
        (4, f"{CHILD!r} reparented from {ROOT!r} to {ROOT_2!r}"),
    ),
    Case(
        "a root announced as some session's child",
        [*root(), *root(2, ROOT_2), subagent_update(ROOT, ROOT_2)],
        (3, f"{ROOT_2!r} reparented"),
    ),
    Case(
        "a session announced as its own child",
        [*root(), subagent_update(ROOT, ROOT)],
        (2, f"{ROOT!r} announced as its own child"),
    ),
    Case(
        "a child announced as its own child",
        [*with_child(), subagent_update(CHILD, CHILD)],
        (3, f"{CHILD!r} announced as its own child"),
    ),
    # A cycle needs an existing session to get a new parent, so today the checker
    # reports it as a reparenting (its own cycle test is never the first to fire);
    # either diagnosis says what is wrong.
    Case(
        "a cycle: the child's parent announced under the child's own child",
        [*with_child(), subagent_update(CHILD, GRANDCHILD), subagent_update(GRANDCHILD, CHILD)],
        (4, (f"{CHILD!r} reparented from {ROOT!r} to {GRANDCHILD!r}", "makes a cycle")),
    ),
    Case(
        "a cycle: the root announced under its own grandchild",
        [*with_child(), subagent_update(CHILD, GRANDCHILD), subagent_update(GRANDCHILD, ROOT)],
        (4, (f"{ROOT!r} reparented from None to {GRANDCHILD!r}", "makes a cycle")),
    ),
    Case(
        "a subagent_update without a child id",
        [*root(), session_update(ROOT, {"sessionUpdate": "subagent_update"})],
        (2, "subagent_update without a child sessionId"),
        valid_acp=False,
    ),
    Case(
        "a session_message between announced sessions passes",
        [*with_child(), session_message(ROOT, sender=ROOT, recipient=CHILD)],
    ),
    Case(
        "a live session_message to an unannounced recipient",
        [*with_child(), session_message(ROOT, sender=ROOT, recipient=STRANGER)],
        (3, f"recipientSessionId {STRANGER!r}, a session never announced"),
    ),
    Case(
        "a live session_message from an unannounced sender",
        [*with_child(), session_message(CHILD, sender=STRANGER, recipient=CHILD)],
        (3, f"senderSessionId {STRANGER!r}, a session never announced"),
    ),
    Case(
        "a replayed session_message naming an unannounced recipient passes (a historical address)",
        [
            load_session(1, ROOT),
            session_message(ROOT, sender=ROOT, recipient=STRANGER),
            load_result(1),
        ],
    ),
    Case(
        "the same session_message once the load has answered",
        [
            load_session(1, ROOT),
            load_result(1),
            session_message(ROOT, sender=ROOT, recipient=STRANGER),
        ],
        (2, f"recipientSessionId {STRANGER!r}"),
    ),
    # Rule 2: the subagents capability.
    *only_with_subagents("subagent_update", [*with_child(), agent_chunk(CHILD)], (with_child(), 2)),
    *only_with_subagents(
        "session_message",
        [*root(), session_message(ROOT, sender=ROOT)],
        ([*root(), agent_chunk(ROOT), session_message(ROOT, sender=ROOT)], 3),
    ),
    *only_with_subagents(
        "session_message_chunk",
        [*root(), session_message_chunk(ROOT)],
        ([*root(), session_message_chunk(ROOT)], 2),
    ),
    Case(
        "ordinary updates to a client without subagents pass",
        [
            *root(),
            agent_chunk(ROOT),
            tool_call(ROOT),
            permission_request(0, ROOT),
            permission_answer(0),
        ],
        subagents=False,
    ),
    # Rule 3: one answer per agent request. A client message is checked at the
    # transcript line it follows, i.e. the number of agent messages sent so far.
    Case(
        "each request answered once passes",
        [
            *root(),
            tool_call(ROOT),
            permission_request(0, ROOT),
            permission_request(1, ROOT),
            permission_answer(1),
            permission_answer(0, "reject"),
        ],
    ),
    Case(
        "a request answered twice",
        [
            *root(),
            tool_call(ROOT),
            permission_request(0, ROOT),
            permission_answer(0),
            permission_answer(0, "reject"),
        ],
        (3, "request 0 was answered more than once"),
    ),
    Case(
        "an answer to a request the agent never sent",
        [*root(), tool_call(ROOT), permission_request(0, ROOT), permission_answer(7)],
        (3, "answered request 7, which the agent never sent"),
    ),
    Case(
        "an answer that reuses the id of the client's own request",
        [*root(), permission_answer(1)],
        (1, "answered request 1, which the agent never sent"),
    ),
    # Rule 4: the session/load freshness boundary.
    Case(
        "replayed history, associations and child history before the load answer pass",
        [
            load_session(1, ROOT),
            user_chunk(ROOT),
            agent_chunk(ROOT),
            subagent_update(ROOT, CHILD, title="Test investigator", capabilities=None),
            user_chunk(CHILD),
            subagent_update(CHILD, GRANDCHILD, capabilities={"cancel": None}),
            load_result(1),
        ],
    ),
    Case(
        "a cancel capability while history is replayed",
        [
            load_session(1, ROOT),
            user_chunk(ROOT),
            subagent_update(ROOT, CHILD, capabilities={"cancel": {}}),
            load_result(1),
        ],
        (2, f"a cancel capability for {CHILD!r} while history is replayed"),
    ),
    Case(
        "a current work state while history is replayed",
        [load_session(1, ROOT), subagent_update(ROOT, CHILD, state={"state": "running"})],
        (1, f"a current work state for {CHILD!r} while history is replayed"),
    ),
    Case(
        "a grandchild's work state while its root's history is replayed",
        [
            load_session(1, ROOT),
            subagent_update(ROOT, CHILD),
            subagent_update(CHILD, GRANDCHILD, state={"state": "idle", "stopReason": "end_turn"}),
        ],
        (2, f"a current work state for {GRANDCHILD!r} while history is replayed"),
    ),
    Case(
        "capability and state after the load answer pass (current facts)",
        [
            load_session(1, ROOT),
            subagent_update(ROOT, CHILD, title="Test investigator"),
            load_result(1),
            subagent_update(ROOT, CHILD, capabilities={"cancel": {}}, state={"state": "running"}),
        ],
    ),
    Case(
        "a work state for another, live session during a load passes",
        [
            *root(1, ROOT_2),
            load_session(2, ROOT),
            subagent_update(ROOT_2, CHILD, capabilities={"cancel": {}}, state={"state": "running"}),
            load_result(2),
        ],
    ),
    Case(
        "a user_message_chunk after the load answer",
        [load_session(1, ROOT), user_chunk(ROOT), load_result(1), user_chunk(ROOT)],
        (3, f"history (user_message_chunk) for {ROOT!r} after the session/load response"),
    ),
    Case(
        "a child's user_message_chunk after its root's load answer",
        [
            load_session(1, ROOT),
            subagent_update(ROOT, CHILD),
            user_chunk(CHILD),
            load_result(1),
            user_chunk(CHILD),
        ],
        (4, f"history (user_message_chunk) for {CHILD!r} after the session/load response"),
    ),
    Case(
        "a second load replays history again and passes",
        [
            load_session(1, ROOT),
            user_chunk(ROOT),
            load_result(1),
            load_session(2, ROOT),
            user_chunk(ROOT),
            load_result(2),
        ],
    ),
    Case(
        "a user_message_chunk in a session that was never loaded passes",
        [*root(), user_chunk(ROOT), agent_chunk(ROOT)],
    ),
    # Rule 5: a tool call is announced on its session before anything names it.
    Case(
        "a tool call announced, then updated and asked about, passes",
        [*root(), tool_call(ROOT), tool_call_update(ROOT), permission_request(0, ROOT)],
    ),
    Case(
        "a permission request naming a tool call never announced",
        [*root(), agent_chunk(ROOT), permission_request(0, ROOT)],
        (3, "tool call 'call_1', which session 'sess_root' was never told of"),
    ),
    Case(
        "a tool call announced on another session",
        [*with_child(), tool_call(CHILD), tool_call_update(ROOT)],
        (4, "tool_call_update names tool call 'call_1'"),
    ),
    Case(
        "a live user message (steered input) after a load response passes",
        [*loaded_with_a_question(), user_chunk(ROOT, "steered words", message_id="u-9")],
    ),
    Case(
        "a replayed user message sent again after the load response",
        [
            *loaded_with_a_question(),
            user_chunk(ROOT, "replayed question", message_id="u-1"),
        ],
        (3, "history (user_message_chunk)"),
    ),
]


def run(conversation: Conversation, subagents: bool) -> int:
    """Feed ``conversation`` as the replay does; return the number of agent messages.

    A :class:`Violation` propagates with ``.at``: the index of the message that raised it.
    """
    checker = TranscriptChecker(subagents=subagents)
    line = 0
    for index, (side, message) in enumerate(conversation):
        try:
            if side == "agent":
                line += 1
                checker.agent(message, line)
            else:
                checker.client(message, line)
        except Violation as exc:
            exc.at = index  # type: ignore[attr-defined]
            raise
    return line


@pytest.mark.parametrize("case", [c for c in CASES if c.violation is None], ids=lambda c: c.id)
def test_a_conversation_that_keeps_the_rules_passes(case: Case) -> None:
    agent_messages = sum(1 for side, _ in case.conversation if side == "agent")
    assert run(case.conversation, case.subagents) == agent_messages


@pytest.mark.parametrize("case", [c for c in CASES if c.violation is not None], ids=lambda c: c.id)
def test_a_broken_rule_is_reported_at_its_first_violating_message_saying_why(case: Case) -> None:
    assert case.violation is not None
    line, words = case.violation
    with pytest.raises(Violation) as caught:
        run(case.conversation, case.subagents)
    violation = caught.value
    alternatives = (words,) if isinstance(words, str) else words
    assert any(w in violation.why for w in alternatives), violation.why
    assert violation.line == line
    assert str(violation) == f"line {line}: {violation.why}"
    # Everything before the raising message passed; the raising message is the
    # agent message numbered ``line``, or a client answer following agent message ``line``.
    at: int = violation.at  # type: ignore[attr-defined]
    side, message = case.conversation[at]
    agents_before = sum(1 for s, _ in case.conversation[:at] if s == "agent")
    if side == "agent":
        assert agents_before + 1 == line
    else:
        assert "method" not in message and agents_before == line


def test_traffic_for_a_session_whose_load_failed_is_unannounced_traffic() -> None:
    conversation = [load_session(1, STRANGER), load_error(1, STRANGER), agent_chunk(STRANGER)]
    with pytest.raises(Violation) as caught:
        run(conversation, subagents=True)
    assert caught.value.line == 2 and "before any announcement" in caught.value.why


def test_the_checker_follows_roots_from_every_session_creating_method() -> None:
    """session/new, /fork answer with the id; /load and /resume name it in the request."""
    conversation: Conversation = [
        *root(1, "s_new"),
        client_request(2, "session/fork", {"sessionId": "s_new", "cwd": "/w", "mcpServers": []}),
        new_session_result(2, "s_fork"),
        client_request(3, "session/resume", {"sessionId": "s_resumed", "cwd": "/w"}),
        load_result(3),
        load_session(4, "s_loaded"),
        load_result(4),
    ]
    conversation += [agent_chunk(s) for s in ("s_new", "s_fork", "s_resumed", "s_loaded")]
    assert run(conversation, subagents=False) == 8
    checker = TranscriptChecker(subagents=False)
    line = 0
    for side, message in conversation:
        if side == "agent":
            line += 1
            checker.agent(message, line)
        else:
            checker.client(message, line)
    assert checker.parents == {"s_new": None, "s_fork": None, "s_resumed": None, "s_loaded": None}


def test_an_error_answer_to_session_new_makes_no_root() -> None:
    conversation = [
        new_session(1),
        ("agent", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "no"}}),
        agent_chunk(ROOT),
    ]
    with pytest.raises(Violation) as caught:
        run(conversation, subagents=False)
    assert caught.value.line == 2 and "before any announcement" in caught.value.why


@pytest.mark.parametrize("case", [c for c in CASES if c.valid_acp], ids=lambda c: c.id)
def test_every_table_message_is_schema_valid_acp(case: Case) -> None:
    """The table's messages are real ACP shapes, so each case tests ordering only."""
    validator = ConversationValidator(unstable=True)
    for side, message in case.conversation:
        assert message["jsonrpc"] == "2.0"
        if side == "agent":
            validator.agent_sent(message)
        elif "method" in message:
            kind = "Request" if "id" in message else "Notification"
            definition = _definition(True, message["method"], "agent", kind)
            validate(definition, message["params"], unstable=True)
            validator.client_sent(message)
        else:  # the table's only agent requests are permission requests
            validate("RequestPermissionResponse", message["result"], unstable=True)


# -- ACP v2 ------------------------------------------------------------------------------------


def v2_initialize() -> Conversation:
    params = {"protocolVersion": 2, "info": {"name": "t", "version": "1"}}
    result = {"protocolVersion": 2, "info": {"name": "a", "version": "1"}}
    return [
        client_request(0, "initialize", params),
        ("agent", {"jsonrpc": "2.0", "id": 0, "result": result}),
    ]


def resume(rid: int, session: str, replay: bool) -> tuple[str, Message]:
    params: Message = {"sessionId": session, "cwd": "/work/project"}
    if replay:
        params["replayFrom"] = {"type": "start"}
    return client_request(rid, "session/resume", params)


def state(session: str, value: str = "idle") -> tuple[str, Message]:
    return session_update(session, {"sessionUpdate": "state_update", "state": value})


@pytest.mark.parametrize("replay", [True, False])
def test_a_v2_resume_answered_before_the_sessions_state_is_a_violation(replay: bool) -> None:
    kept = [*v2_initialize(), resume(1, ROOT, replay), state(ROOT), load_result(1)]
    assert run(kept, subagents=False) == 3
    broken = [*v2_initialize(), resume(1, ROOT, replay), load_result(1)]
    with pytest.raises(Violation) as caught:
        run(broken, subagents=False)
    assert "before its current state_update" in caught.value.why


def test_a_v2_childs_state_during_the_replay_is_a_violation_and_after_it_is_not() -> None:
    replayed = [
        *v2_initialize(),
        resume(1, ROOT, True),
        subagent_update(ROOT, CHILD, title="Test investigator"),
        agent_chunk(CHILD),
    ]
    after = [*replayed, state(ROOT), load_result(1), state(CHILD, "running")]
    assert run(after, subagents=False) == 6
    during = [*replayed, state(CHILD, "running"), state(ROOT), load_result(1)]
    with pytest.raises(Violation) as caught:
        run(during, subagents=False)
    assert "while history is replayed" in caught.value.why


def test_v2_needs_no_subagents_capability_and_v2_tool_calls_are_upserts() -> None:
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "pending"}
    conversation = [
        *v2_initialize(),
        *root(1),
        session_update(ROOT, update),
        subagent_update(ROOT, CHILD, title="Test investigator"),
    ]
    assert run(conversation, subagents=False) == 4

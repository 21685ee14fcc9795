"""The official ACP TypeScript SDK's **v2** client (@agentclientprotocol/sdk 2.4.0,
``experimental/v2/unstable``) driving the real bridge, the real Codex and the scripted model.

The driver (``tools/node/acp_sdk_v2_client.mjs``) prints every raw message it received as one
JSON line; each test asserts what a v2 client relies on (texts, states in order, matching ids),
then re-checks every payload against the v2 schema and the RFD's transcript rules.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.recording import TranscriptChecker
from tests.conftest import REPO
from tests.support.acp_schema import ConversationValidator
from tests.support.e2e import run_sdk_driver, words
from tests.support.reading import Ended, states_of, text_of
from tests.support.scenarios.subagents import CHILD_WORDS, LONG_CHILD, SPAWN_THREE, script, spawn

pytestmark = pytest.mark.e2e

SdkDriver = Callable[..., Awaitable[list[Any]]]

SDK_V2_CLIENT = REPO / "tools" / "node" / "acp_sdk_v2_client.mjs"

ESCALATED = (
    '@@ call exec_command {"cmd":"touch approved.txt","sandbox_permissions":"require_escalated",'
    '"justification":"needs it"}\n@@ then\n@@ say done'
)
#: A child streaming for half a minute, which the client cancels; the parent's own work goes on
#: for ten seconds, long enough for Codex to stop the child on a loaded machine (the driver
#: stops listening when the parent's work ends, so the child's end must come before).
CANCEL_CHILD = script(spawn(LONG_CHILD), "@@ sleep 10000\n@@ say parent done")
RUNNING = {"state": "running"}
DONE = Ended({"state": "idle", "stopReason": "end_turn"})
CANCELLED = Ended({"state": "idle", "stopReason": "cancelled"})
#: The updates that carry conversation history (what a replay sends).
HISTORY = frozenset({"user_message", "user_message_chunk", "agent_message_chunk"})

Event = dict[str, Any]


# -- running the driver --------------------------------------------------------------------------


@pytest.fixture
def sdk_v2_client(node: str, bridge_env: dict[str, str], workspace: Path) -> SdkDriver:
    """``events = await sdk_v2_client(*args)``: the driver run in the workspace with ``args``."""
    return functools.partial(_run_sdk_v2_client, node, bridge_env, workspace)


async def _run_sdk_v2_client(
    node: str, env: dict[str, str], workspace: Path, *args: str
) -> list[Event]:
    result, events = await run_sdk_driver(node, SDK_V2_CLIENT, env, "--cwd", str(workspace), *args)
    tail = "\n".join(str(e)[:300] for e in events[-15:])
    assert result.returncode == 0, (
        f"driver exited {result.returncode}; last events:\n{tail}\n"
        f"stderr:\n{result.stderr.decode()[-3000:]}"
    )
    failed = [
        e for e in events if e["event"] in ("sdk_rejected", "timeout", "connection_closed", "error")
    ]
    assert not failed, f"the SDK refused or lost messages: {failed}"
    assert events[-1] == {"event": "exit", "code": 0}, tail
    _validate(events, workspace)
    return events


def _request_params(method: str, session: str | None, workspace: Path) -> dict[str, Any]:
    """The params the driver sent with ``method`` (it prints responses, not its requests)."""
    if method == "session/new":
        return {"cwd": str(workspace), "mcpServers": []}
    if method == "session/resume":
        return {
            "sessionId": session,
            "cwd": str(workspace),
            "mcpServers": [],
            "replayFrom": {"type": "start"},
        }
    if method == "session/prompt":
        return {"sessionId": session}
    return {"protocolVersion": 2}


def _validate(events: list[Event], workspace: Path) -> None:
    """Every raw payload against the v2 (unstable) schema, method by method, and the agent's
    messages of each connection, in order, through the RFD's transcript checker."""
    connections: dict[int, list[Event]] = {}
    for e in events:
        connections.setdefault(e.get("connection", 1), []).append(e)
    session: str | None = None  # connection 2 resumes the session connection 1 created
    for number, own in sorted(connections.items()):
        try:
            session = _validate_connection(own, workspace, session)
        except Exception as exc:
            raise AssertionError(f"connection {number} breaks ACP v2: {exc}") from exc


def _validate_connection(events: list[Event], workspace: Path, session: str | None) -> str | None:
    """One connection's events (see :func:`_validate`); returns the session it created.

    The driver prints responses, not its requests, and sends each request once the previous
    one is answered (a prompt once the turn before it is idle), so the next request is fed
    right after the last response: ``session/resume`` reaches the checker before the
    history it replays, the initialize response first (the checker learns v2 from it)."""
    validator = ConversationValidator(version=2, unstable=True)
    checker = TranscriptChecker(subagents=True)
    methods = iter([e["method"] for e in events if e["event"] in ("response", "error")])
    request_id = 0

    def send_next() -> None:
        nonlocal request_id
        method = next(methods, None)
        if method is None:
            return
        request_id += 1
        params = _request_params(method, session, workspace)
        validator.client_sent({"id": request_id, "method": method})
        checker.client({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, 0)

    send_next()
    line = 0
    asked: list[str] = []
    for e in events:
        message: dict[str, Any]
        if e["event"] in ("response", "error"):
            key = "result" if e["event"] == "response" else "error"
            message = {"jsonrpc": "2.0", "id": request_id, key: e[key]}
        elif e["event"] == "notification":
            message = {"jsonrpc": "2.0", "method": e["method"], "params": e["params"]}
        elif e["event"] == "request":  # the driver prints no id: any unique one does
            asked.append(f"agent-{line}")
            message = {"jsonrpc": "2.0", "id": asked[-1], "method": e["method"]}
            message["params"] = e["params"]
        elif e["event"] == "answered":
            checker.client({"jsonrpc": "2.0", "id": asked[-1], "result": e["result"]}, line)
            continue
        else:
            continue
        line += 1
        try:
            validator.agent_sent(message)
            checker.agent(message, line)
        except Exception as exc:
            raise AssertionError(f"agent message {line}: {exc}\n{str(message)[:2000]}") from exc
        if e["event"] in ("response", "error"):
            if e["method"] == "session/new" and e["event"] == "response":
                session = e["result"]["sessionId"]
            send_next()
    return session


# -- reading the events --------------------------------------------------------------------------


def _responses(events: list[Event], method: str, connection: int = 1) -> list[Event]:
    return [
        e
        for e in events
        if e["event"] == "response"
        and e["method"] == method
        and e.get("connection", 1) == connection
    ]


def _indexed_updates(
    events: list[Event],
    session: str | None = None,
    kind: str | None = None,
    *,
    connection: int = 1,
    start: int = 0,
    stop: int | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """(index in ``events``, update) of the session/update notifications that match."""
    found = []
    for n, e in enumerate(events[start:stop], start=start):
        if (
            e["event"] != "notification"
            or e["method"] != "session/update"
            or e.get("connection", 1) != connection
        ):
            continue
        update = e["params"]["update"]
        if session is not None and e["params"]["sessionId"] != session:
            continue
        if kind is not None and update["sessionUpdate"] != kind:
            continue
        found.append((n, update))
    return found


def _states_in(events: list[Event], session: str, **where: Any) -> list[dict[str, Any]]:
    """The ``state_update``s of ``session``, without their ``sessionUpdate`` tag."""
    return states_of(u for _, u in _indexed_updates(events, session, "state_update", **where))


def _text_in(events: list[Event], session: str, **where: Any) -> str:
    return text_of(u for _, u in _indexed_updates(events, session, "agent_message_chunk", **where))


def _session_of(events: list[Event]) -> str:
    [new] = _responses(events, "session/new")
    session: str = new["result"]["sessionId"]
    return session


def _idle_after(events: list[Event], session: str, start: int) -> int:
    """The index of the first ``idle`` state of ``session`` after ``start``: the end of the
    work a prompt answered at ``start`` began."""
    for n, u in _indexed_updates(events, session, "state_update", start=start):
        if u["state"] == "idle":
            return n
    raise AssertionError(f"no idle state_update on {session} after event {start}")


def _echo(events: list[Event], session: str, message_id: str) -> tuple[int, dict[str, Any]]:
    echoes = [
        (n, u)
        for n, u in _indexed_updates(events, session, "user_message")
        if u.get("messageId") == message_id
    ]
    assert len(echoes) == 1, f"one user_message with messageId {message_id!r}, got {echoes}"
    return echoes[0]


def _children(events: list[Event], parent: str) -> list[tuple[int, str]]:
    """(index, child) of each child's first ``subagent_update`` on the parent's stream."""
    seen: dict[str, int] = {}
    for n, u in _indexed_updates(events, parent, "subagent_update"):
        seen.setdefault(u["sessionId"], n)
    return [(n, child) for child, n in seen.items()]


def _mirrored(events: list[Event], parent: str, child: str) -> list[dict[str, Any]]:
    """The states the parent's ``subagent_update``s carried for ``child``."""
    return [
        u["state"]
        for _, u in _indexed_updates(events, parent, "subagent_update")
        if u["sessionId"] == child and u.get("state") is not None
    ]


def _messages(events: list[Event], on: str, sender: str, recipient: str) -> list[str]:
    """The texts of the ``session_message``s on ``on``'s stream from sender to recipient."""
    return [
        text_of([u], "session_message")
        for _, u in _indexed_updates(events, on, "session_message")
        if u.get("senderSessionId") == sender and u.get("recipientSessionId") == recipient
    ]


# -- the tests -----------------------------------------------------------------------------------


async def test_sdk_v2_client_prompts_stream_and_end_idle(sdk_v2_client: SdkDriver) -> None:
    prompts = ["@@ words 500", "@@ say bye"]
    events = await sdk_v2_client("--prompt", prompts[0], "--prompt", prompts[1])
    [init] = _responses(events, "initialize")
    assert init["result"]["protocolVersion"] == 2, init
    assert events.index(init) == 0 and events[1]["method"] == "session/new"
    session = _session_of(events)
    answers = _responses(events, "session/prompt")
    assert len(answers) == 2, answers
    ids = [a["result"].get("messageId") for a in answers]
    assert all(isinstance(i, str) and i for i in ids) and ids[0] != ids[1], ids
    expected_texts = [words(500), "bye"]
    # The driver prints a response when the SDK resolves it, which may be after the
    # notifications that followed it on the wire: each prompt's work is read from the
    # previous prompt's idle on.
    previous_end = 0
    for answer, message_id, prompt, expected in zip(
        answers, ids, prompts, expected_texts, strict=True
    ):
        start = events.index(answer)
        end = _idle_after(events, session, start)
        at, echo = _echo(events, session, message_id)
        assert previous_end < at < end, "the user_message echo is within the prompt's work"
        assert echo["content"] == [{"type": "text", "text": prompt}], echo
        assert _states_in(events, session, start=previous_end, stop=end + 1) == [RUNNING, DONE]
        assert _text_in(events, session, start=previous_end, stop=end) == expected
        previous_end = end + 1
    assert _states_in(events, session) == [RUNNING, DONE] * 2
    every = _indexed_updates(events)
    assert {events[n]["params"]["sessionId"] for n, _ in every} == {session}
    assert "tool_call" not in {u["sessionUpdate"] for _, u in every}, "v1's tool_call in v2"


@pytest.mark.parametrize("permission", ["allow_once", "reject_once"])
async def test_sdk_v2_client_answers_a_command_approval(
    sdk_v2_client: SdkDriver, workspace: Path, permission: str
) -> None:
    events = await sdk_v2_client("--prompt", ESCALATED, "--permission", permission)
    session = _session_of(events)
    [asked] = [e for e in events if e["event"] == "request"]
    assert asked["method"] == "session/request_permission", asked
    request = asked["params"]
    assert request["sessionId"] == session
    assert "touch approved.txt" in request["title"], request
    assert request["subject"]["type"] == "tool_call", request
    tool_call_id = request["subject"]["toolCall"]["toolCallId"]
    kinds = [o["kind"] for o in request["options"]]
    assert {"allow_once", "reject_once"} <= set(kinds), request["options"]
    [answered] = [e for e in events if e["event"] == "answered"]
    chosen = next(o for o in request["options"] if o["kind"] == permission)
    assert answered["result"] == {
        "outcome": {"outcome": "selected", "optionId": chosen["optionId"]}
    }
    assert events[events.index(answered) - 1] is asked
    assert _states_in(events, session) == [RUNNING, {"state": "requires_action"}, RUNNING, DONE]
    tool_updates = [u for _, u in _indexed_updates(events, session, "tool_call_update")]
    command = [u for u in tool_updates if u["toolCallId"] == tool_call_id]
    assert command, f"no tool_call_update for {tool_call_id}: {tool_updates}"
    assert "touch approved.txt" in command[0]["title"], command[0]
    assert command[-1]["status"] == ("completed" if permission == "allow_once" else "failed")
    assert (workspace / "approved.txt").exists() == (permission == "allow_once")
    assert _text_in(events, session) == "done"


async def test_sdk_v2_client_cancels_mid_stream(sdk_v2_client: SdkDriver) -> None:
    events = await sdk_v2_client(
        "--prompt", "@@ words 3000 delay_ms=10", "--cancel-after-chunks", "10"
    )
    session = _session_of(events)
    [cancel] = [e for e in events if e["event"] == "cancel_sent"]
    assert cancel["params"] == {"sessionId": session}
    [answer] = _responses(events, "session/prompt")
    assert isinstance(answer["result"].get("messageId"), str), answer
    assert _states_in(events, session) == [RUNNING, CANCELLED]
    end = _idle_after(events, session, events.index(answer))
    assert events.index(cancel) < end
    text = _text_in(events, session)
    assert 10 <= len(text.split()) < 3000, len(text.split())
    assert words(3000).startswith(text), "the streamed words arrive whole and in order"
    assert not _indexed_updates(events, session, "agent_message_chunk", start=end), (
        "text after idle"
    )


async def test_sdk_v2_client_resumes_with_replay(sdk_v2_client: SdkDriver) -> None:
    prompts = ["@@ say remembered words", "@@ say second answer"]
    events = await sdk_v2_client("--prompt", prompts[0], "--prompt", prompts[1], "--resume-replay")
    session = _session_of(events)
    [resumed] = _responses(events, "session/resume", connection=2)
    answered = events.index(resumed)
    live = {u["messageId"] for _, u in _indexed_updates(events, session, "agent_message_chunk")}
    replayed = _indexed_updates(events, session, connection=2, stop=answered)
    assert replayed, "nothing reached connection 2 before the resume answer"
    history = [(u["sessionUpdate"], u) for _, u in replayed if u["sessionUpdate"] in HISTORY]
    said = [
        (
            "user" if kind.startswith("user") else "agent",
            text_of([u], kind),
        )
        for kind, u in history
    ]
    assert said == [
        ("user", prompts[0]),
        ("agent", "remembered words"),
        ("user", prompts[1]),
        ("agent", "second answer"),
    ], said
    replayed_ids = [(kind, u.get("messageId")) for kind, u in history]
    assert len(set(replayed_ids)) == len(replayed_ids), f"replayed twice: {replayed_ids}"
    agent_ids = {u["messageId"] for kind, u in history if kind == "agent_message_chunk"}
    assert agent_ids == live, "the replayed answers keep the ids they streamed with"
    last_index, last = replayed[-1]
    assert last == {"sessionUpdate": "state_update", "state": "idle"}, last
    assert last_index == answered - 1, "the session's state_update is sent just before the answer"
    after = _indexed_updates(events, session, connection=2, start=answered)
    assert not [u for _, u in after if u["sessionUpdate"] in HISTORY], "history after the answer"
    assert [e for e in events if e["event"] == "exit"] == [
        {"event": "exit", "connection": 2, "code": 0},
        {"event": "exit", "code": 0},
    ]


async def test_sdk_v2_client_sees_sub_agents_on_both_streams(sdk_v2_client: SdkDriver) -> None:
    events = await sdk_v2_client("--prompt", SPAWN_THREE)
    parent = _session_of(events)
    kids = _children(events, parent)
    assert len(kids) == 3, kids
    said_by: dict[str, str] = {}
    for announced, child in kids:
        own = [n for n, e in enumerate(events) if e.get("params", {}).get("sessionId") == child]
        assert own and announced < own[0], f"{child}'s own traffic before its announcement"
        states = _states_in(events, child)
        assert states[0] == RUNNING and states[-1] == DONE, states
        assert _mirrored(events, parent, child) == states, "the parent mirrors the child's states"
        [assignment] = _messages(events, child, parent, child)
        assert _messages(events, parent, parent, child) == [assignment]
        word = assignment.removeprefix("@@ say ").removesuffix(" reporting")
        assert assignment == f"@@ say {word} reporting", assignment
        assert _text_in(events, child) == f"{word} reporting"
        assert _messages(events, parent, child, parent) == [f"{word} reporting"]
        said_by[child] = word
    assert sorted(said_by.values()) == sorted(CHILD_WORDS)
    assert _states_in(events, parent) == [RUNNING, DONE]
    assert _text_in(events, parent) == "all three reported"


async def test_sdk_v2_client_cancels_one_child(sdk_v2_client: SdkDriver) -> None:
    events = await sdk_v2_client("--prompt", CANCEL_CHILD, "--cancel-child-after-announce")
    parent = _session_of(events)
    [(announced, child)] = _children(events, parent)
    [cancel] = [e for e in events if e["event"] == "child_cancel_sent"]
    assert cancel["sessionId"] == child and announced < events.index(cancel)
    states = _states_in(events, child)
    assert states[0] == RUNNING and states[-1] == CANCELLED, states
    assert _mirrored(events, parent, child) == states
    text = _text_in(events, child)
    assert len(text.split()) < 3000 and words(3000).startswith(text), text[-200:]
    assert _states_in(events, parent) == [RUNNING, DONE], "the parent's work was not cancelled"
    child_end = max(n for n, _ in _indexed_updates(events, child, "state_update"))
    parent_end = _idle_after(events, parent, announced)
    assert child_end < parent_end, "the parent's work went on after its child stopped"
    assert _text_in(events, parent) == "parent done"

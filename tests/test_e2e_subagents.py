"""Sub-agent sessions end to end: the real Codex 0.169 spawns, a v1 ACP client watches.

Each test is named after the RFD validation scenario or the issue's rule it proves. The
conversations are the fixtures' (``tests/support/scenarios/subagents.py``), played live; what
the client saw is checked against the RFD (announcement before traffic, session messages, work
state, cancellation, restricted sessions), validated against the unstable ACP schema, and the
bridge's raw stdout is checked to carry nothing but JSON-RPC messages. Where Codex's side
matters (what it sent first, what the bridge asked it), the bridge runs as
``codex-acp-bridge record`` and the recording is read too.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from bridge.acp_client import AcpClient
from bridge.engine import Engine, ToClient
from bridge.jsonrpc import RpcError
from bridge.recording import Recording, TranscriptChecker, read_recording
from bridge.recording.format import EventRecord, MessageRecord
from bridge.recording.replay import engine_options
from bridge.scripted_model import ScriptedModel, write_codex_home
from bridge.shell.streams import LineStream
from tests.support.acp_schema import ConversationValidator
from tests.support.app_server import app_server, crash
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, record_argv
from tests.support.processes import wait_or_kill
from tests.support.reading import Ended, text_of
from tests.support.scenarios import prompt_outcome
from tests.support.scenarios import subagents as scenario
from tests.support.scenarios.approvals import Answers
from tests.support.scenarios.subagents import (
    CHILD_WORDS,
    NESTED_TOML,
    announcements,
    children,
    mentions,
    restricted_calls,
    states,
)
from tests.test_subagent_properties import (
    FIXTURES,
    Reordered,
    children_first,
    is_spawn,
    order_of,
    plan_of,
    reordered,
    replay_checked,
)

# Version-sensitive: run against both ends of the tested Codex range.
pytestmark = [pytest.mark.e2e, pytest.mark.codex_versions]


# -- running the bridge with its stdout tapped ---------------------------------------------------------


class _Tap(trio.abc.ReceiveStream):
    """The bridge's stdout, every byte kept as it is read."""

    def __init__(self, inner: trio.abc.ReceiveStream, kept: list[bytes]) -> None:
        self.inner, self.kept = inner, kept

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = await self.inner.receive_some(max_bytes)
        self.kept.append(bytes(data))
        return bytes(data)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def bridge(
    argv: Sequence[str], env: dict[str, str], log_path: Path
) -> AsyncIterator[tuple[AcpClient, list[bytes]]]:
    """The bridge as a subprocess with a client on its stdio; also every byte of its stdout."""
    stdout: list[bytes] = []
    with log_path.open("ab") as log:
        process = await trio.lowlevel.open_process(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.fileno(), env=env
        )
        assert process.stdin is not None and process.stdout is not None
        client = AcpClient(LineStream(_Tap(process.stdout, stdout), process.stdin))
        _note_request_positions(client)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            try:
                yield client, stdout
            finally:
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(1):
                        await process.stdin.aclose()
                    await wait_or_kill(process, 10)
                nursery.cancel_scope.cancel()


def assert_stdout_is_protocol_only(stdout: list[bytes]) -> None:
    """Every line the bridge wrote is one JSON-RPC 2.0 message: no log line, no blank line."""
    data = b"".join(stdout)
    assert data, "the bridge wrote nothing"
    lines = data.split(b"\n")
    assert lines[-1] == b"", "the last message is terminated"
    for line in lines[:-1]:
        message = msgspec.json.decode(line)
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line[:200]
        assert "method" in message or (
            "id" in message and ("result" in message or "error" in message)
        )


def _note_request_positions(client: AcpClient) -> None:
    """Keep where each client request fell among the messages received (``client.sent_at``),
    so the RFD checker can follow the conversation in its real order."""
    sent_at: dict[Any, int] = {}
    send = client.peer.request

    def request(method: str, params: Any, context: Any) -> tuple[Any, bytes]:
        rid, data = send(method, params, context)
        sent_at[rid] = len(client.received)
        return rid, data

    client.peer.request = request  # type: ignore[method-assign]
    client.sent_at = sent_at  # type: ignore[attr-defined]


def check_transcript(client: AcpClient) -> None:
    """The RFD checker, for the capability the client really declared, with each client request
    in its place among the messages received; and the unstable schema for every message.

    ``assert_valid_acp(client, unstable=True)`` runs the checker as for a client that declared
    ``subagents``, and feeds it every client request before the first message received: a
    request naming a child (a refused ``session/load`` of a child id) then looks like a root's.
    """
    [init] = [r for r, m in client.sent_requests.items() if m == "initialize"]
    declared = (client.sent_params[init].get("clientCapabilities") or {}).get("subagents")
    checker = TranscriptChecker(subagents=declared is not None)
    validator = ConversationValidator(unstable=True)
    sent_at: dict[Any, int] = client.sent_at  # type: ignore[attr-defined]
    pending = sorted(client.sent_requests, key=lambda rid: sent_at[rid])
    for line, message in enumerate([*client.received, None], start=1):
        while pending and sent_at[pending[0]] < line:
            rid = pending.pop(0)
            request = {
                "jsonrpc": "2.0",
                "id": rid,
                "method": client.sent_requests[rid],
                "params": client.sent_params[rid],
            }
            checker.client(request, line - 1)
            validator.client_sent(request)
        if message is not None:
            checker.agent(message, line)
            validator.agent_sent(message)


def finish(client: AcpClient, stdout: list[bytes], *, shared_helper: bool = True) -> None:
    """The end of every scenario: the ordered RFD check, the shared ``assert_valid_acp`` with
    the unstable schema, and a bridge stdout of protocol messages only."""
    check_transcript(client)
    if shared_helper:
        assert_valid_acp(client, unstable=True)
    assert_stdout_is_protocol_only(stdout)


Tapped = Callable[..., AbstractAsyncContextManager[tuple[AcpClient, list[bytes]]]]
Play = Callable[..., Awaitable[tuple[AcpClient, list[bytes]]]]


@pytest.fixture
def tapped(bridge_argv: list[str], bridge_env: dict[str, str], stderr_file: Path) -> Tapped:
    """``async with tapped(record=out) as (client, stdout)``: :func:`bridge` with the test's
    command line and environment (or ``argv`` and ``env``); with ``record``, run as
    ``codex-acp-bridge record`` into that file."""

    def start(
        *,
        record: Path | None = None,
        argv: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> AbstractAsyncContextManager[tuple[AcpClient, list[bytes]]]:
        if argv is None:
            argv = bridge_argv if record is None else record_argv(record)
        return bridge(argv, bridge_env if env is None else env, stderr_file)

    return start


@pytest.fixture
def play(tapped: Tapped, workspace: Path) -> Play:
    """``client, stdout = await play(scene, record=out)``: one of the scenarios
    (``tests/support/scenarios/subagents.py``) played through :func:`tapped`, in the
    workspace, to its end."""

    async def run(
        scene: Callable[[AcpClient, str], Awaitable[Any]], **options: Any
    ) -> tuple[AcpClient, list[bytes]]:
        with trio.fail_after(SCENARIO_SECONDS):
            async with tapped(**options) as (client, stdout):
                await scene(client, str(workspace))
        return client, stdout

    return run


# -- reading what happened -----------------------------------------------------------------------------


def root_of(client: AcpClient) -> str:
    [rid] = [r for r, m in client.sent_requests.items() if m == "session/new"]
    return str(result_of(client, rid)["sessionId"])


def result_of(client: AcpClient, rid: Any) -> Any:
    [answer] = [m for m in client.received if m.get("id") == rid and "method" not in m]
    return answer.get("result", answer.get("error"))


def prompt_results(client: AcpClient) -> list[Any]:
    return [result_of(client, r) for r, m in client.sent_requests.items() if m == "session/prompt"]


def updates(client: AcpClient, kind: str, session: str | None = None) -> list[dict[str, Any]]:
    return [
        p["update"]
        for p in client.updates
        if p["update"]["sessionUpdate"] == kind and session in (None, p["sessionId"])
    ]


def first_mention(client: AcpClient, session: str) -> int:
    return next(n for n, m in enumerate(client.received) if mentions(m, session))


def announcement_index(client: AcpClient, child: str) -> int:
    return next(
        n
        for n, m in enumerate(client.received)
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "subagent_update"
        and m["params"]["update"]["sessionId"] == child
    )


def titles(client: AcpClient) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for update in updates(client, "subagent_update"):
        found.setdefault(update["sessionId"], update.get("title"))
    return found


def nicknames(model: ScriptedModel) -> dict[str, str]:
    """Codex's own names for the agents: the ``spawn_agent`` results it gave the model."""
    found: dict[str, str] = {}
    for body in model.requests:
        for item in body.get("input", []):
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                try:
                    output = json.loads(item.get("output") or "null")
                except (TypeError, json.JSONDecodeError):
                    continue
                if isinstance(output, dict) and "agent_id" in output:
                    found[output["agent_id"]] = output.get("nickname")
    return found


def texts(messages: list[dict[str, Any]]) -> list[str]:
    """What each of the ``session_message`` updates ``messages`` says."""
    return [text_of([m], "session_message") for m in messages]


def collapsed(client: AcpClient, child: str) -> list[str]:
    """The child's work states as the parent's stream reported them, repeats collapsed."""
    out: list[str] = []
    for state in states(client, child):
        if not out or out[-1] != state["state"]:
            out.append(state["state"])
    return out


def capabilities(client: AcpClient, child: str) -> list[Any]:
    return [
        u["capabilities"]
        for u in updates(client, "subagent_update")
        if u["sessionId"] == child and "capabilities" in u
    ]


def cause_of(
    recording: Recording, wanted: Callable[[dict[str, Any]], bool]
) -> dict[str, Any] | None:
    """Replay ``recording`` and return the input (a Codex or client message) whose handling
    made the engine send the first client message satisfying ``wanted``."""
    engine = Engine(
        thread_config=(recording.header.engine or {}).get("threadConfig"),
        **engine_options(recording),
    )
    engine.start()
    for entry in recording.entries:
        record = entry.record
        if isinstance(record, EventRecord):
            effects = (
                engine.codex_lost(record.reason)
                if record.event == "codex_lost"
                else engine.client_lost()
            )
            message = None
        else:
            assert isinstance(record, MessageRecord)
            if record.dir == "to_codex":
                continue
            data = record.data()
            message = msgspec.json.decode(data)
            effects = (
                engine.receive_client(data)
                if record.dir == "from_client"
                else engine.receive_codex(data)
            )
        for effect in effects:
            if isinstance(effect, ToClient) and wanted(msgspec.json.decode(effect.data)):
                return message
    return None


def codex_sent(recording: Recording, method: str) -> list[dict[str, Any]]:
    return [
        msgspec.json.decode(e.record.data())
        for e in recording.entries
        if isinstance(e.record, MessageRecord)
        and e.record.dir == "to_codex"
        and msgspec.json.decode(e.record.data()).get("method") == method
    ]


def is_state(child: str, state: str, stop_reason: Any = ...) -> Callable[[dict[str, Any]], bool]:
    def wanted(message: dict[str, Any]) -> bool:
        update = (message.get("params") or {}).get("update") or {}
        snapshot = update.get("state") or {}
        return (
            update.get("sessionUpdate") == "subagent_update"
            and update.get("sessionId") == child
            and snapshot.get("state") == state
            and (stop_reason is ... or snapshot.get("stopReason") == stop_reason)
        )

    return wanted


# -- the scenarios ---------------------------------------------------------------------------------------


async def test_children_spawned_in_one_step_are_announced_before_their_traffic_with_codex_nicknames(
    play: Play, route: str, scripted_model: ScriptedModel
) -> None:
    """Issue rules "Identity", "Announcement", "Display", "Session messages": three parallel
    spawn calls in one step, then a wait for each."""
    client, stdout = await play(scenario.spawn_and_wait)
    root = root_of(client)
    assert prompt_results(client) == [Ended({"stopReason": "end_turn"})]
    kids = children(client)
    assert len(kids) == 3 and len(set(kids)) == 3
    assert {parent for parent, _ in announcements(client)} == {root}
    # Each child's announcement comes before any message bearing its id, in any role.
    for kid in kids:
        assert first_mention(client, kid) == announcement_index(client, kid)
    # Codex runs the three parallel calls one after the other: a child's own traffic may come
    # before a later sibling's announcement (never before its own, checked above).
    # Titles are Codex's nicknames (what spawn_agent told the model).
    names = nicknames(scripted_model)
    assert titles(client) == {kid: names[kid] for kid in kids}
    assert all(names[kid] for kid in kids)
    # The parent's outgoing views: one per child, the spawn prompt; never a spawn tool call.
    outgoing = [m for m in updates(client, "session_message", root) if m["senderSessionId"] == root]
    assert sorted(m["recipientSessionId"] for m in outgoing) == sorted(kids)
    sent_to = {m["recipientSessionId"]: texts([m])[0] for m in outgoing}
    assert sorted(sent_to.values()) == sorted(f"@@ say {w} reporting" for w in CHILD_WORDS)
    assert not [
        u for u in updates(client, "tool_call", root) if u["rawInput"]["tool"] == "spawnAgent"
    ]
    # Each child's own transcript: the incoming view of its assignment, then its own text.
    for kid in kids:
        word = sent_to[kid].split()[2]
        [incoming] = updates(client, "session_message", kid)
        assert (incoming["senderSessionId"], incoming["recipientSessionId"]) == (root, kid)
        assert texts([incoming]) == [sent_to[kid]]
        assert incoming["messageId"] != next(
            m["messageId"] for m in outgoing if m["recipientSessionId"] == kid
        )
        assert client.text_of(kid) == f"{word} reporting"
        assert states(client, kid)[-1] == Ended({"state": "idle", "stopReason": "end_turn"})
    # The parent received each child's result (wait): incoming messages; waits stay tool calls.
    incoming = [
        m for m in updates(client, "session_message", root) if m["recipientSessionId"] == root
    ]
    assert {m["senderSessionId"]: texts([m])[0] for m in incoming} == {
        kid: f"{sent_to[kid].split()[2]} reporting" for kid in kids
    }
    waits = [u for u in updates(client, "tool_call", root) if u["rawInput"]["tool"] == "wait"]
    assert len(waits) == 3
    assert client.text_of(root) == "all three reported"
    finish(client, stdout)


async def test_send_two_assignments_to_the_same_child_conversation(play: Play, route: str) -> None:
    """RFD validation scenario: keep its ACP session id, use distinct message ids, and allow
    running → idle → running."""
    client, stdout = await play(scenario.send_input_reuse)
    root = root_of(client)
    [kid] = children(client)
    assert prompt_results(client) == [Ended({"stopReason": "end_turn"})]
    outgoing = [m for m in updates(client, "session_message", root) if m["senderSessionId"] == root]
    assert [m["recipientSessionId"] for m in outgoing] == [kid, kid], "the same session, twice"
    assert texts(outgoing) == ["@@ say first assignment done", "@@ say second assignment done"]
    incoming = updates(client, "session_message", kid)
    assert texts(incoming) == texts(outgoing)
    for view in (outgoing, incoming):
        assert len({m["messageId"] for m in view}) == 2
    answers = {m["messageId"] for m in updates(client, "agent_message_chunk", kid)}
    assert len(answers) == 2, "each assignment's answer is its own message"
    assert client.text_of(kid) == "first assignment donesecond assignment done"
    # running → idle → running → idle: Codex reports the fresh child idle before its first
    # turn starts, which is no work that ended, so no idle comes before the first running.
    assert collapsed(client, kid) == ["running", "idle", "running", "idle"]
    assert states(client, kid)[-1] == Ended({"state": "idle", "stopReason": "end_turn"})
    results = [m for m in updates(client, "session_message", root) if m["senderSessionId"] == kid]
    assert texts(results) == ["first assignment done", "second assignment done"]
    finish(client, stdout)


async def test_a_nested_child_is_announced_on_its_parents_stream_after_its_parent(
    play: Play, route: str, codex_home: Path, scripted_model: ScriptedModel
) -> None:
    """Issue rule "Identity: nested children have their own parent"; RFD: never announce a
    nested child under the root."""
    write_codex_home(codex_home, scripted_model.base_url, extra_toml=NESTED_TOML)
    client, stdout = await play(scenario.nested_spawn)
    root = root_of(client)
    assert prompt_results(client) == [Ended({"stopReason": "end_turn"})]
    [(parent1, middle), (parent2, grandchild)] = announcements(client)
    assert (parent1, parent2) == (root, middle)
    assert announcement_index(client, middle) < announcement_index(client, grandchild)
    assert first_mention(client, grandchild) == announcement_index(client, grandchild)
    on_root = [u for u in updates(client, "subagent_update", root) if u["sessionId"] == grandchild]
    assert not on_root, "the grandchild is never announced (or updated) on the root's stream"
    assert titles(client) == {k: v for k, v in nicknames(scripted_model).items()}
    assert client.text_of(middle) == "middle done"
    assert client.text_of(grandchild) == "grandchild here"
    [to_grandchild] = [
        m for m in updates(client, "session_message", middle) if m["senderSessionId"] == middle
    ]
    assert to_grandchild["recipientSessionId"] == grandchild
    assert texts([to_grandchild]) == ["@@ say grandchild here"]
    from_grandchild = [
        m for m in updates(client, "session_message", middle) if m["senderSessionId"] == grandchild
    ]
    assert texts(from_grandchild) == ["grandchild here"]
    from_middle = [
        m for m in updates(client, "session_message", root) if m["senderSessionId"] == middle
    ]
    assert texts(from_middle) == ["middle done"]
    assert states(client, grandchild)[-1] == Ended({"state": "idle", "stopReason": "end_turn"})
    finish(client, stdout)


async def test_a_childs_permission_request_is_its_own_after_its_announcement_and_shows_requires_action(
    play: Play, route: str, workspace: Path
) -> None:
    """Issue rules "Announcement ... including its permission requests" and "Work state:
    requires_action while one of its approval requests is open, back to running"."""
    client, stdout = await play(scenario.child_approval)
    root = root_of(client)
    [kid] = children(client)
    assert prompt_results(client) == [Ended({"stopReason": "end_turn"})]
    [request] = [m for m in client.received if m.get("method") == "session/request_permission"]
    assert request["params"]["sessionId"] == kid
    assert announcement_index(client, kid) < client.received.index(request)
    assert "child-approved.txt" in request["params"]["toolCall"]["title"]
    # requires_action while open (the client held its answer until it saw it), running after.
    flow = collapsed(client, kid)
    assert "requires_action" in flow
    after = flow[flow.index("requires_action") + 1 :]
    assert after[:1] == ["running"] and after[-1] == "idle"
    # Allowed once: the command ran, the child and the parent finished.
    assert (workspace / "child-approved.txt").exists()
    assert client.text_of(kid) == "child done" and client.text_of(root) == "parent done"
    assert states(client, kid)[-1] == Ended({"state": "idle", "stopReason": "end_turn"})
    finish(client, stdout)


async def test_deliver_a_child_permission_callback_before_spawn_metadata(
    play: Play, tmp_path: Path
) -> None:
    """RFD validation scenario. Live, Codex 0.169's threads race: the child's first events
    come before or after the spawn item completes, and the bridge may read the child before
    it. Whatever the order, the bridge asks on the child's session after announcing it. The
    order the scenario needs (the request before the spawn item completes and before the
    bridge's read of the child is answered) is then built by replaying a recording in that
    order: this run's when Codex's order in it lets the request move there, else the
    committed recording of the same scenario. The request is held until the child is
    announced, and asked on the child's session."""
    out = tmp_path / "child_approval.codex.jsonl"
    client, stdout = await play(scenario.child_approval, record=out)
    finish(client, stdout)
    [kid] = children(client)
    [live_request] = [m for m in client.received if m.get("method") == "session/request_permission"]
    assert live_request["params"]["sessionId"] == kid
    assert first_mention(client, kid) == announcement_index(client, kid)
    assert announcement_index(client, kid) < client.received.index(live_request)

    source, child, reordering = request_before_spawn_metadata(read_recording(out))
    transcript = replay_checked(reordering.data, "child_approval")  # the RFD checker runs
    messages = [m for side, m in transcript.conversation if side == "agent"]
    [request] = [m for m in messages if m.get("method") == "session/request_permission"]
    assert request["params"]["sessionId"] == child, source
    announced = next(n for n, m in enumerate(messages) if mentions(m, child))
    assert messages[announced]["params"]["update"]["sessionUpdate"] == "subagent_update", source
    assert announced < messages.index(request), source


def request_before_spawn_metadata(live: Recording) -> tuple[str, str, Reordered]:
    """A recording of ``child_approval`` reordered so the child's permission request comes
    before the spawn item completes and before any answer to the bridge's ``thread/read``;
    with where it came from and the child's thread id.

    From ``live`` when its barriers allow that: not when Codex completed the spawn item before
    the bridge's read of the child (about one run in ten), since the bridge's requests to
    Codex keep their recorded places. Else from the committed fixture, which allows it.
    """
    sources = [
        ("this run's recording", live),
        (
            "fixtures/child_approval.codex.jsonl",
            read_recording(FIXTURES / "child_approval.codex.jsonl"),
        ),
    ]
    for source, recording in sources:
        p = plan_of(recording)
        reordering = reordered(p, functools.partial(children_first, p))
        at = {i: n for n, i in enumerate(order_of(p, reordering))}
        [ask] = [
            i
            for i, m in enumerate(p.messages)
            if m is not None and m.get("method") == "item/commandExecution/requestApproval"
        ]
        spawned = next(
            i
            for i, m in enumerate(p.messages)
            if m is not None and m.get("method") == "item/completed" and is_spawn(m)
        )
        reads = [at[i] for i in p.read_answers]
        if reads and at[ask] < at[spawned] and at[ask] < min(reads):
            asked = p.messages[ask]
            assert asked is not None
            return source, asked["params"]["threadId"], reordering
    pytest.fail("no recording lets the child's request precede the spawn metadata")


async def test_cancel_a_child_alone_when_codex_confirms_and_the_parent_goes_on(
    play: Play, tmp_path: Path
) -> None:
    """Issue rule "Cancellation": capabilities.cancel while the bridge can target the child's
    turn; session/cancel on the child interrupts that turn only; idle+cancelled when Codex
    confirms (turn/completed interrupted), not when it acknowledges; the parent's turn goes on."""
    out = tmp_path / "cancel_child.codex.jsonl"
    client, stdout = await play(scenario.cancel_child, record=out)
    root = root_of(client)
    [kid] = children(client)
    assert prompt_results(client) == [Ended({"stopReason": "end_turn"})]
    assert client.text_of(root) == "parent done"
    assert 20 <= len(client.text_of(kid).split()) < 3000
    assert states(client, kid)[-1] == Ended({"state": "idle", "stopReason": "cancelled"})
    grants = capabilities(client, kid)
    assert grants[0] == {"cancel": {}} and grants[-1].get("cancel") is None
    # Advertised while it ran: granted before the first words, withdrawn with the cancelled state.
    cancelled = next(
        u
        for u in updates(client, "subagent_update")
        if u["sessionId"] == kid and u.get("state", {}).get("stopReason") == "cancelled"
    )
    assert cancelled.get("capabilities", {}).get("cancel") is None
    recording = read_recording(out)
    turns = codex_sent(recording, "turn/interrupt")
    assert [t["params"]["threadId"] for t in turns] == [kid], "the child's turn only"
    cause = cause_of(recording, is_state(kid, "idle", "cancelled"))
    assert cause is not None and cause["method"] == "turn/completed"
    assert cause["params"]["threadId"] == kid and cause["params"]["turn"]["status"] == "interrupted"
    finish(client, stdout)


async def test_cancelling_the_parent_cascades_to_its_running_child(
    play: Play, tmp_path: Path
) -> None:
    """Issue rule "session/cancel on a parent → interrupt the parent's turn and every active
    descendant (Codex does not cascade)"."""
    out = tmp_path / "cancel_parent.codex.jsonl"
    client, stdout = await play(scenario.cancel_parent_cascades, record=out)
    root = root_of(client)
    [kid] = children(client)
    assert prompt_results(client) == [Ended({"stopReason": "cancelled"})]
    assert states(client, kid)[-1] == Ended({"state": "idle", "stopReason": "cancelled"})
    assert len(client.text_of(kid).split()) < 3000
    recording = read_recording(out)
    interrupted = {t["params"]["threadId"] for t in codex_sent(recording, "turn/interrupt")}
    assert interrupted == {root, kid}
    cause = cause_of(recording, is_state(kid, "idle", "cancelled"))
    assert cause is not None and cause["method"] == "turn/completed"
    assert cause["params"]["turn"]["status"] == "interrupted"
    finish(client, stdout)


async def test_a_child_that_fails_is_idle_with_the_error_and_the_parent_goes_on(
    play: Play, route: str
) -> None:
    """Issue rule "a failed turn: idle with the error reported as the schema allows"."""
    client, stdout = await play(scenario.child_fails)
    root = root_of(client)
    [kid] = children(client)
    assert prompt_results(client) == [Ended({"stopReason": "end_turn"})]
    assert client.text_of(root) == "parent carries on"
    assert client.text_of(kid) == "word1 word2"
    last = states(client, kid)[-1]
    assert last["state"] == "idle" and last.get("stopReason") is None
    assert "stream" in last["_meta"]["error"], "Codex's own message"
    [result] = [m for m in updates(client, "session_message", root) if m["senderSessionId"] == kid]
    assert "stream" in texts([result])[0]
    finish(client, stdout)


async def test_finish_a_message_before_the_child_finishes_and_keep_receiving_child_events_after_the_prompt(
    tapped: Tapped, route: str, workspace: Path
) -> None:
    """RFD validation scenario "Finish reporting a message before the child finishes
    processing it, and keep receiving child events after the parent's prompt response"."""
    prompt = scenario.script(scenario.spawn("@@ words 80 delay_ms=25"), "@@ say spawned")
    with trio.fail_after(SCENARIO_SECONDS):
        async with tapped() as (client, stdout):
            root = await scenario.open_session(client, str(workspace), scenario.SUBAGENTS)
            assert await client.prompt(root, prompt) == Ended({"stopReason": "end_turn"})
            answered = len(client.received)
            # The child is announced once its thread is read, which may end after the
            # parent's prompt (announced before its own traffic, not before its parent's).
            await client.wait_for(lambda _m: len(children(client)) == 1)
            [kid] = children(client)
            await client.wait_for(lambda _m: scenario.has_state(client, kid, "idle", "end_turn"))
    later = client.received[answered:]
    # The parent's outgoing message was complete before the child had done anything with it.
    [outgoing] = [
        m for m in updates(client, "session_message", root) if m["senderSessionId"] == root
    ]
    assert texts([outgoing]) == ["@@ words 80 delay_ms=25"]
    # The child's answer streamed on after the prompt's response, and its turn ended there.
    assert any(
        m.get("method") == "session/update"
        and m["params"]["sessionId"] == kid
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        for m in later
    )
    assert any(is_state(kid, "idle", "end_turn")(m) for m in later)
    assert client.text_of(kid) == " ".join(f"word{i}" for i in range(1, 81))
    finish(client, stdout)


async def test_restricted_methods_on_a_child_are_refused_and_children_are_not_listed(
    tapped: Tapped, route: str, workspace: Path
) -> None:
    """Issue rule "Restricted sessions"."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with tapped() as (client, stdout):
            await scenario.send_input_reuse(client, str(workspace))
            root = root_of(client)
            [kid] = children(client)
            for method, params in restricted_calls(str(workspace), "@@ say hi"):
                with pytest.raises(RpcError) as refused:
                    await client.request(method, {"sessionId": kid, **params})
                assert refused.value.code == -32602, method
                assert method in refused.value.message and kid in refused.value.message
                assert "subagent session" in refused.value.message
            listed = await client.request("session/list", {})
            ids = [s["sessionId"] for s in listed["sessions"]]
            assert root in ids and kid not in ids
            # The child is still there, and the root still works.
            assert await client.prompt(root, "@@ say still here") == Ended(
                {"stopReason": "end_turn"}
            )
    # The shared helper would take the refused session/load of the child for a root's (see
    # check_transcript); the ordered check covers the same rules and the unstable schema.
    finish(client, stdout, shared_helper=False)


async def test_a_client_without_the_subagents_capability_never_sees_a_child_and_nothing_blocks(
    play: Play, route: str, workspace: Path, scripted_model: ScriptedModel
) -> None:
    """Issue rule "Clients without the capability": no subagent_update or session_message, the
    spawn is a tool call on the root, a child's permission request is asked on the root session
    naming the agent, nothing blocks."""
    client, stdout = await play(scenario.subagents_without_capability)
    root = root_of(client)
    assert prompt_results(client) == [Ended({"stopReason": "end_turn"})]
    kinds = {p["update"]["sessionUpdate"] for p in client.updates}
    assert not kinds & {"subagent_update", "session_message", "session_message_chunk"}
    assert {p["sessionId"] for p in client.updates} == {root}
    spawns = [
        u
        for u in updates(client, "tool_call", root)
        if u.get("rawInput", {}).get("tool") == "spawnAgent"
    ]
    assert len(spawns) == 1
    [(child, nickname)] = nicknames(scripted_model).items()
    [request] = [m for m in client.received if m.get("method") == "session/request_permission"]
    assert request["params"]["sessionId"] == root
    assert request["params"]["toolCall"]["title"].startswith(f"{nickname}: ")
    assert child not in json.dumps(request)
    # The root is told of the child's command before the request names it; the command's own
    # item then ends it there.
    asked = request["params"]["toolCall"]["toolCallId"]
    [introduced] = [u for u in updates(client, "tool_call", root) if u["toolCallId"] == asked]
    assert introduced["title"] == request["params"]["toolCall"]["title"]
    closed = [u for u in updates(client, "tool_call_update", root) if u["toolCallId"] == asked]
    assert [u["status"] for u in closed] == ["in_progress", "completed"]
    assert closed[-1]["rawOutput"]["exitCode"] == 0
    assert (workspace / "child-approved.txt").exists(), "allowed on the root, the child ran it"
    assert client.text_of(root) == "parent done"
    finish(client, stdout)


async def test_cancel_a_child_and_then_an_ancestor_while_interactions_are_pending(
    tapped: Tapped, workspace: Path, tmp_path: Path
) -> None:
    """RFD validation scenario: native work is targeted correctly, an acknowledgement is not
    taken for completion, and a late answer authorizes nothing. The child waits on a permission
    request the client holds; the client cancels the child, then the parent, then allows."""
    out = tmp_path / "cancel_pending.codex.jsonl"
    prompt = scenario.script(
        scenario.spawn(scenario.ESCALATED_CHILD),
        scenario.wait(timeout_ms=30_000),
        "@@ say parent done",
    )
    answers = Answers(permission="allow_once", hold=True)
    with trio.fail_after(SCENARIO_SECONDS):
        async with tapped(record=out) as (client, stdout):
            client.on_request = answers
            root = await scenario.open_session(client, str(workspace), scenario.SUBAGENTS)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.prompt, root, prompt)
                await answers.asked.wait()
                [kid] = children(client)
                await client.wait_for(lambda _m: scenario.has_state(client, kid, "requires_action"))
                await client.notify("session/cancel", {"sessionId": kid})
                await client.wait_for(
                    lambda _m: scenario.has_state(client, kid, "idle", "cancelled")
                )
                await client.notify("session/cancel", {"sessionId": root})
                await client.wait_for(
                    lambda m: m.get("result") == Ended({"stopReason": "cancelled"})
                )
                answers.release()  # the client's allow, now too late
                await wait_all_tasks_blocked()
            # The bridge reads the client in order: once it answers this, it has the late allow.
            await client.request("session/list", {})
    assert prompt_results(client) == [Ended({"stopReason": "cancelled"})]
    [request] = answers.asked_for("session/request_permission")
    assert request["sessionId"] == kid
    recording = read_recording(out)
    codex_requests = [
        msgspec.json.decode(e.record.data())
        for e in recording.entries
        if isinstance(e.record, MessageRecord)
        and e.record.dir == "from_codex"
        and msgspec.json.decode(e.record.data()).get("method")
        == "item/commandExecution/requestApproval"
    ]
    [asked] = codex_requests
    answered = [
        msgspec.json.decode(e.record.data())
        for e in recording.entries
        if isinstance(e.record, MessageRecord)
        and e.record.dir == "to_codex"
        and msgspec.json.decode(e.record.data()).get("id") == asked["id"]
        and "method" not in msgspec.json.decode(e.record.data())
    ]
    late = [
        msgspec.json.decode(e.record.data())
        for e in recording.entries
        if isinstance(e.record, MessageRecord)
        and e.record.dir == "from_client"
        and "method" not in msgspec.json.decode(e.record.data())
    ]
    assert [a["result"]["outcome"]["optionId"] for a in late] == ["allow_once"], (
        "the client's late allow did reach the bridge"
    )
    assert [a["result"] for a in answered] == [{"decision": "cancel"}], "once, and cancel"
    assert not (workspace / "child-approved.txt").exists(), "the late allow ran nothing"
    interrupted = [t["params"]["threadId"] for t in codex_sent(recording, "turn/interrupt")]
    assert interrupted[0] == kid and root in interrupted
    cause = cause_of(recording, is_state(kid, "idle", "cancelled"))
    assert cause is not None and cause.get("method") == "turn/completed"
    finish(client, stdout)


async def test_closing_the_parent_stops_its_running_child(
    tapped: Tapped, workspace: Path, tmp_path: Path
) -> None:
    """Issue rule "Cancellation" and the RFD's resource ownership: the agent owns child work."""
    out = tmp_path / "close_parent.codex.jsonl"
    with trio.fail_after(SCENARIO_SECONDS):
        async with tapped(record=out) as (client, stdout):
            root = await scenario.open_session(client, str(workspace), scenario.SUBAGENTS)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.prompt, root, scenario.CANCEL_CHILD)
                kid = await scenario.words_from_first_child(client, 20)
                await client.request("session/close", {"sessionId": root})
            with trio.move_on_after(5):
                await client.wait_for(lambda _m: scenario.has_state(client, kid, "idle"))
    recording = read_recording(out)
    interrupted = {t["params"]["threadId"] for t in codex_sent(recording, "turn/interrupt")}
    assert kid in interrupted
    assert len(client.text_of(kid).split()) < 3000
    finish(client, stdout)


async def test_lose_a_childs_activity_feed_while_acp_stays_connected(
    tapped: Tapped, codex_bin: str, codex_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """RFD validation scenario: report ``unknown`` without inventing an outcome. The bridge is
    attached to an app-server of the test's own over WebSocket; the test kills it while a
    child streams."""
    async with app_server(codex_bin, codex_home, tmp_path) as (url, token, process):
        argv = [sys.executable, "-m", "bridge", "serve", "--codex-url", url]
        argv += ["--codex-token-file", str(token), "--log-level", "info"]
        with trio.fail_after(SCENARIO_SECONDS):
            async with tapped(argv=argv, env=dict(os.environ)) as (client, stdout):
                root = await scenario.open_session(client, str(workspace), scenario.SUBAGENTS)
                outcome: dict[str, Any] = {}
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        prompt_outcome, client, root, scenario.CANCEL_PARENT, outcome
                    )
                    kid = await scenario.words_from_first_child(client, 20)
                    crash(process)
                    await client.wait_for(lambda _m: scenario.has_state(client, kid, "unknown"))
                    await client.wait_for(
                        lambda m: "id" in m and "method" not in m and m["id"] == 2
                    )
    last = states(client, kid)[-1]
    assert last == {"state": "unknown"}, "no outcome invented"
    assert not [s for s in states(client, kid) if s.get("stopReason") in ("cancelled", "end_turn")]
    assert capabilities(client, kid)[-1].get("cancel") is None, "nothing left to cancel"
    assert "error" in outcome, "the parent's prompt fails: Codex is gone"
    finish(client, stdout)


async def test_a_child_closed_and_resumed_keeps_its_session_and_close_and_resume_stay_tool_calls(
    tapped: Tapped, route: str, workspace: Path
) -> None:
    """Issue rules "Identity: the same for every later send_input, wait or resume_agent" and
    "wait and close_agent stay ordinary tool calls of the session that made them"."""
    prompt = scenario.script(
        scenario.spawn("@@ say one"),
        scenario.wait(),
        scenario.call("multi_agent_v1/close_agent", {"target": "{{agent_id}}"}),
        scenario.call("multi_agent_v1/resume_agent", {"id": "{{agent_id}}"}),
        scenario.send_input("@@ say two"),
        scenario.wait(),
        "@@ say parent done",
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with tapped() as (client, stdout):
            root = await scenario.open_session(client, str(workspace), scenario.SUBAGENTS)
            assert await client.prompt(root, prompt) == Ended({"stopReason": "end_turn"})
    [kid] = children(client)
    tools = [u["rawInput"]["tool"] for u in updates(client, "tool_call", root)]
    assert tools == ["wait", "closeAgent", "resumeAgent", "wait"]
    title = titles(client)[kid]
    assert [u["title"] for u in updates(client, "tool_call", root)][1:3] == [
        f"Close {title}",
        f"Resume {title}",
    ]
    assert texts(updates(client, "session_message", kid)) == ["@@ say one", "@@ say two"]
    assert client.text_of(kid) == "onetwo"
    assert collapsed(client, kid)[-4:] == ["running", "idle", "running", "idle"]
    finish(client, stdout)


async def test_a_child_idle_during_its_parents_cancel_takes_its_next_assignment(
    tapped: Tapped, workspace: Path, tmp_path: Path
) -> None:
    """RFD: "Cancellation does not close the child session or prevent the parent from
    assigning later work to it"; a cancel racing with ended work does not rewrite it."""
    first = scenario.script(
        scenario.spawn("@@ say first"), scenario.wait(), "@@ words 3000 delay_ms=10"
    )
    second = scenario.script(
        scenario.send_input("@@ say second"), scenario.wait(), "@@ say parent done"
    )
    out = tmp_path / "cancel_idle.codex.jsonl"
    with trio.fail_after(SCENARIO_SECONDS):
        async with tapped(record=out) as (client, stdout):
            root = await scenario.open_session(client, str(workspace), scenario.SUBAGENTS)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.prompt, root, first)
                await client.wait_for(lambda _m: len(client.text_of(root).split()) >= 20)
                [kid] = children(client)
                # The child's end may reach the bridge after the parent's first words (Codex's
                # threads race); the scenario needs it before the cancel, so it waits for it.
                await client.wait_for(
                    lambda _m: scenario.has_state(client, kid, "idle", "end_turn")
                )
                await client.notify("session/cancel", {"sessionId": root})
            assert await client.prompt(root, second) == Ended({"stopReason": "end_turn"})
    assert prompt_results(client) == [
        Ended({"stopReason": "cancelled"}),
        Ended({"stopReason": "end_turn"}),
    ]
    assert client.text_of(kid) == "firstsecond"
    assert states(client, kid)[-1] == Ended({"state": "idle", "stopReason": "end_turn"})
    recording = read_recording(out)
    assert kid not in {t["params"]["threadId"] for t in codex_sent(recording, "turn/interrupt")}
    finish(client, stdout)

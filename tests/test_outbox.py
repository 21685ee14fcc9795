"""The client's outbox: deltas merge while the client is behind, and nothing else changes.

The shell's half (when the client counts as behind) is in tests/test_shell.py; a real
client pausing mid-answer against the real Codex is in tests/test_e2e_slow_client.py.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.acp import tools as acp_tools
from bridge.acp import types as acp_types
from bridge.engine import ToClient, ToCodex
from bridge.engine.core.outbox import Outbox, merge_of, update_effect
from tests.support.reading import text_of

Effect = ToClient | ToCodex


def chunk(session: str, text: str, message: str = "m1", *, thought: bool = False) -> ToClient:
    kind = acp_types.AgentThoughtChunk if thought else acp_types.AgentMessageChunk
    return update_effect(session, kind(content=acp_types.TextContent(text=text), messageId=message))


def terminal_output(session: str, call: str, data: str) -> ToClient:
    meta = {"terminal_output": {"terminal_id": call, "data": data}}
    return update_effect(session, acp_tools.ToolCallUpdate(toolCallId=call, meta=meta))


def call_content(session: str, call: str, text: str) -> ToClient:
    content = [acp_tools.Content(content=acp_types.TextContent(text=text))]
    return update_effect(session, acp_tools.ToolCallUpdate(toolCallId=call, content=content))


def plan(session: str, *steps: str) -> ToClient:
    entries = [acp_tools.PlanEntry(content=s, priority="medium", status="pending") for s in steps]
    return update_effect(session, acp_tools.Plan(entries=entries))


def tool_call_start(session: str, call: str) -> ToClient:
    return update_effect(session, acp_tools.ToolCall(toolCallId=call, title="ls", kind="execute"))


def response(rid: int) -> ToClient:
    return ToClient(b'{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}' % rid)


def drain(outbox: Outbox) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while outbox:
        out.extend(msgspec.json.decode(data) for data in outbox.take(64 * 1024))
    return out


def update_of(message: dict[str, Any]) -> dict[str, Any]:
    update: dict[str, Any] = message["params"]["update"]
    return update


def texts(messages: list[dict[str, Any]]) -> list[str]:
    updates = [update_of(m) for m in messages]
    return [text_of([u], u["sessionUpdate"]) for u in updates]


def behind_outbox() -> Outbox:
    outbox = Outbox()
    outbox.behind = True
    return outbox


def test_a_client_that_keeps_up_gets_every_delta_as_its_own_message() -> None:
    outbox = Outbox()
    effects = [chunk("s", w) for w in ("one ", "two ", "three")]
    for effect in effects:
        outbox.put(effect)
    assert outbox.take(1 << 20) == [e.data for e in effects]
    assert outbox.merged == 0


def test_while_behind_the_deltas_of_one_message_become_one_chunk() -> None:
    outbox = behind_outbox()
    words = ["Hello", ", ", "wörld ", '"quoted"\n', "\\ end 🎉"]
    for word in words:
        outbox.put(chunk("s", word))
    [message] = drain(outbox)
    assert update_of(message) == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "".join(words)},
        "messageId": "m1",
    }
    assert message["params"]["sessionId"] == "s"
    assert outbox.merged == len(words) - 1
    assert outbox.size == 0


def test_merging_is_per_session_and_keeps_each_sessions_order() -> None:
    outbox = behind_outbox()
    for n in range(3):
        outbox.put(chunk("a", f"a{n} "))
        outbox.put(chunk("b", f"b{n} "))
    messages = drain(outbox)
    assert [(m["params"]["sessionId"], update_of(m)["content"]["text"]) for m in messages] == [
        ("a", "a0 a1 a2 "),
        ("b", "b0 b1 b2 "),
    ]


def test_streams_do_not_merge_across_messages_or_kinds() -> None:
    outbox = behind_outbox()
    outbox.put(chunk("s", "A1", "A"))
    outbox.put(chunk("s", "A2", "A"))
    outbox.put(chunk("s", "B1", "B"))
    outbox.put(chunk("s", "A3", "A"))
    outbox.put(chunk("s", "T1", "A", thought=True))
    outbox.put(chunk("s", "T2", "A", thought=True))
    messages = drain(outbox)
    assert [(update_of(m)["sessionUpdate"], update_of(m)["messageId"]) for m in messages] == [
        ("agent_message_chunk", "A"),
        ("agent_message_chunk", "B"),
        ("agent_message_chunk", "A"),
        ("agent_thought_chunk", "A"),
    ]
    assert texts(messages) == ["A1A2", "B1", "A3", "T1T2"]


def test_anything_else_for_the_session_flushes_its_pending_chunk_first() -> None:
    outbox = behind_outbox()
    outbox.put(chunk("s", "before "))
    outbox.put(chunk("other", "x"))
    outbox.put(tool_call_start("s", "call-1"))
    outbox.put(chunk("s", "after"))
    outbox.put(chunk("other", "y"))
    messages = drain(outbox)
    kinds = [(m["params"]["sessionId"], update_of(m)["sessionUpdate"]) for m in messages]
    assert kinds == [
        ("s", "agent_message_chunk"),
        ("other", "agent_message_chunk"),
        ("s", "tool_call"),
        ("s", "agent_message_chunk"),
    ]
    # The other session's chunk still took its later delta: only "s" was flushed.
    assert texts([messages[0], messages[1], messages[3]]) == ["before ", "xy", "after"]


def test_a_message_for_no_session_keeps_its_place_against_every_session() -> None:
    outbox = behind_outbox()
    outbox.put(chunk("a", "1"))
    outbox.put(chunk("b", "1"))
    outbox.put(response(7))
    outbox.put(chunk("a", "2"))
    outbox.put(chunk("b", "2"))
    messages = drain(outbox)
    assert [m.get("id", m.get("params", {}).get("sessionId")) for m in messages] == [
        "a",
        "b",
        7,
        "a",
        "b",
    ]


def test_a_taken_message_takes_no_more_deltas() -> None:
    outbox = behind_outbox()
    outbox.put(chunk("s", "one "))
    [first] = outbox.take(1 << 20)
    outbox.put(chunk("s", "two "))
    outbox.put(chunk("s", "three"))
    assert texts([msgspec.json.decode(first)]) == ["one "]
    assert texts(drain(outbox)) == ["two three"]


def test_deltas_queued_before_the_client_fell_behind_take_the_rest() -> None:
    outbox = Outbox()
    outbox.put(chunk("s", "a"))
    outbox.put(chunk("s", "b"))
    outbox.behind = True
    outbox.put(chunk("s", "c"))
    outbox.put(chunk("s", "d"))
    assert texts(drain(outbox)) == ["a", "bcd"]


def test_terminal_output_is_appended_and_whole_contents_replace() -> None:
    outbox = behind_outbox()
    for data in ("line 1\n", "line 2\n", "\x1b[1mbold\x1b[0m\n"):
        outbox.put(terminal_output("s", "call-1", data))
    for so_far in ("out", "out, more", "out, more, all"):
        outbox.put(call_content("s", "call-2", so_far))
    outbox.put(plan("s", "read"))
    outbox.put(plan("s", "read", "write"))
    messages = drain(outbox)
    assert len(messages) == 3
    terminal, content, whole_plan = (update_of(m) for m in messages)
    assert terminal["_meta"] == {
        "terminal_output": {
            "terminal_id": "call-1",
            "data": "line 1\nline 2\n\x1b[1mbold\x1b[0m\n",
        }
    }
    assert terminal["toolCallId"] == "call-1"
    assert content["content"] == [
        {"type": "content", "content": {"type": "text", "text": "out, more, all"}}
    ]
    assert [e["content"] for e in whole_plan["entries"]] == ["read", "write"]


def test_updates_that_set_more_than_a_delta_never_merge() -> None:
    outbox = behind_outbox()
    status = update_effect("s", acp_tools.ToolCallUpdate(toolCallId="c", status="completed"))
    both = update_effect(
        "s",
        acp_tools.ToolCallUpdate(
            toolCallId="c",
            status="completed",
            content=[acp_tools.Content(content=acp_types.TextContent(text="x"))],
        ),
    )
    assert merge_of("s", status.update) is None
    assert merge_of("s", both.update) is None
    for effect in (call_content("s", "c", "a"), both, call_content("s", "c", "b"), status):
        outbox.put(effect)
    assert len(drain(outbox)) == 4


def test_size_counts_the_bytes_waiting_merged_text_included() -> None:
    outbox = behind_outbox()
    first = chunk("s", "x" * 100)
    outbox.put(first)
    outbox.put(chunk("s", "y" * 1000))
    assert outbox.size == len(first.data) + 1000
    outbox.put(ToCodex(b"{}"))
    assert outbox.size == len(first.data) + 1002
    drain(outbox)
    assert outbox.size == 0


def test_a_long_run_is_rebuilt_once_and_exactly() -> None:
    outbox = behind_outbox()
    words = [f"w{n} " for n in range(20_000)]
    for word in words:
        outbox.put(chunk("s", word))
    assert len(outbox) == 1
    assert texts(drain(outbox)) == ["".join(words)]


# -- the same rules, for any sequence --------------------------------------------------------

SESSIONS = ("a", "b")


@st.composite
def traffic(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Effects, with the client falling behind and catching up, and writes in between."""
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(0, 40))):
        session = draw(st.sampled_from(SESSIONS))
        kind = draw(st.integers(0, 9))
        text = draw(st.text(max_size=4))
        if kind <= 3:
            steps.append(("put", chunk(session, text, draw(st.sampled_from(["m1", "m2"])))))
        elif kind == 4:
            steps.append(("put", chunk(session, text, "m1", thought=True)))
        elif kind == 5:
            steps.append(("put", terminal_output(session, "c1", text)))
        elif kind == 6:
            steps.append(("put", call_content(session, "c1", text)))
        elif kind == 7:
            steps.append(
                ("put", draw(st.sampled_from([tool_call_start(session, "c2"), response(1)])))
            )
        elif kind == 8:
            steps.append(("behind", draw(st.booleans())))
        else:
            steps.append(("take", draw(st.integers(1, 400))))
    return steps


def _stream(message: dict[str, Any]) -> tuple[Any, ...]:
    if "params" not in message or "update" not in message["params"]:
        return ("other", repr(message))
    update = update_of(message)
    kind = update["sessionUpdate"]
    if kind in ("agent_message_chunk", "agent_thought_chunk"):
        return (kind, update["messageId"])
    return (kind, update.get("toolCallId"), tuple(sorted(update)))


def _piece(message: dict[str, Any]) -> tuple[str, Any]:
    """What a message adds to its stream: ("+", text) appends, ("=", whole) replaces."""
    if "params" in message and "update" in message["params"]:
        update = update_of(message)
        if "content" in update and isinstance(update["content"], dict):
            return ("+", update["content"]["text"])
        if "_meta" in update:
            return ("+", update["_meta"]["terminal_output"]["data"])
        return ("=", update)
    return ("=", message)


def normal(messages: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Per session (and ``None`` for everything, for messages of no session), the runs of
    one stream folded together: what the client ends up knowing, in its order."""
    out: dict[str, list[Any]] = {}

    def add(key: str, stream: tuple[Any, ...], piece: tuple[str, Any]) -> None:
        runs = out.setdefault(key, [])
        if runs and runs[-1][0] == stream and piece[0] == "+":
            runs[-1] = (stream, runs[-1][1] + piece[1])
        elif runs and runs[-1][0] == stream and stream[0] == "tool_call_update":
            runs[-1] = (stream, piece[1])  # content-only updates: the newer whole
        else:
            runs.append((stream, piece[1]))

    for message in messages:
        session = message.get("params", {}).get("sessionId")
        stream, piece = _stream(message), _piece(message)
        if session is None:
            for key in out:
                out[key].append(("barrier", repr(message)))
            out.setdefault("", []).append(("barrier", repr(message)))
        else:
            add(session, stream, piece)
    return out


@settings(max_examples=300, deadline=None)
@given(traffic())
def test_whatever_merges_the_client_ends_up_with_the_same_stream_per_session(
    steps: list[tuple[str, Any]],
) -> None:
    outbox = Outbox()
    sent: list[dict[str, Any]] = []
    put: list[dict[str, Any]] = []
    for step, value in steps:
        if step == "put":
            outbox.put(value)
            put.append(msgspec.json.decode(value.data))
        elif step == "behind":
            outbox.behind = value
        elif outbox:
            sent.extend(msgspec.json.decode(d) for d in outbox.take(value))
    sent.extend(drain(outbox))
    assert normal(sent) == normal(put)
    assert len(sent) + outbox.merged == len(put)
    assert outbox.size == 0


@settings(max_examples=100, deadline=None)
@given(traffic())
def test_a_client_never_behind_gets_exactly_what_was_put(steps: list[tuple[str, Any]]) -> None:
    outbox = Outbox()
    sent: list[bytes] = []
    put: list[bytes] = []
    for step, value in steps:
        if step == "put":
            outbox.put(value)
            put.append(value.data)
        elif step == "take" and outbox:
            sent.extend(outbox.take(value))
    while outbox:
        sent.extend(outbox.take(1 << 20))
    assert sent == put


def test_only_each_sessions_last_message_keeps_its_update_for_merging() -> None:
    """What can no longer be joined holds only its bytes, so a long backlog costs about what
    the ceiling counts (the update objects of every queued chunk would triple it)."""
    outbox = Outbox()
    for n in range(1000):
        outbox.put(chunk("a", f"a{n}"))
        outbox.put(chunk("b", f"b{n}"))
    holding = [e for e in outbox._queue if e.update is not None]
    assert [e.session_id for e in holding] == ["a", "b"]
    outbox.put(response(1))
    assert not [e for e in outbox._queue if e.update is not None]
    # ... and merging still works on what comes next.
    outbox.behind = True
    outbox.put(chunk("a", "x"))
    outbox.put(chunk("a", "y"))
    assert texts(drain(outbox)[-1:]) == ["xy"]

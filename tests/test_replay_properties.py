"""Property tests: orderings of the real recordings that Codex could also have produced.

Each fixture in ``fixtures/`` (and ``fixtures/codex-0.169/``) is one interleaving
that the real Codex 0.171 (0.169) happened to produce. Codex writes its messages from concurrent tasks (request
handlers, each thread's event listener, connection-wide broadcasts), so other
interleavings of the same messages are equally possible. Here hypothesis draws
such interleavings of each fixture's ``from_codex`` records, writes them back as
a recording (``format.encode_record``; the end record still counts the
messages), replays them with the RFD checker on, and asserts that what the user
sees does not depend on the interleaving:

- every ACP message is valid against the official schema;
- the text streamed per session (``agent_message_chunk`` and, separately,
  ``agent_thought_chunk``) is the original fixture's;
- each client request is answered exactly once, with the original answer (so
  each prompt's ``stopReason``, or its error code and message, is unchanged).

The legal reorderings, deliberately conservative (``legal_moves`` below):

1. **Notifications that are not items of the turn float around it.** Codex
   writes them from other tasks than the turn's item stream, so where they land
   among the turn's messages is a race. How far each may go:

   - ``account/rateLimits/updated`` (account-wide, no thread), and the
     connection-level ``configWarning``, ``mcpServer/startupStatus/updated``,
     ``remoteControl/status/changed``: anywhere after the turn's ``turn/start``
     request and before its ``turn/completed``.
   - ``warning`` (raised while Codex sets the turn up, before it answers
     ``turn/start`` in every recording): anywhere after the ``turn/start``
     request and before the turn's first ``item/*`` event, so across the
     ``turn/start`` answer, ``turn/started`` and ``thread/status/changed``.
   - ``thread/status/changed`` and ``thread/readState/changed`` describe the
     thread's state, which the items change: they keep their place relative to
     the turn's ``item/*`` events (``active`` before the first item, ``idle``
     after the last) and float among its other messages. CODEX-NOTES
     ("Connections") says status changes are broadcast to every connection,
     unlike the turn's own stream, so they are not sequenced with
     ``turn/started``, ``thread/tokenUsage/updated`` or ``error``.

   None crosses its turn's ``turn/completed`` (the boundary the client acts
   on), and two notifications of the same method and thread keep their order.
2. **Start-up notifications float until the next answer.** ``configWarning`` and
   ``remoteControl/status/changed`` sent before any turn come after the
   ``initialized`` handshake and before Codex answers the next request (an
   assumption kept on the safe side: they are queued at start-up, so nothing
   Codex answers later overtakes them).
3. **Turn requests' answers may be late.** The answer to ``turn/start`` or
   ``turn/interrupt`` may come later than recorded, past any of the turn's
   notifications (``turn/started``, items, deltas: the answer and the turn's
   events are written by different tasks, which race), but never before the
   request (it keeps its recorded predecessors), never after the turn's
   ``turn/completed`` (CODEX-NOTES: the turn ends *later* than the interrupt's
   acknowledgement), and never past the next thing the client or the bridge did
   (a conservative bound: that next step may have depended on the answer).
   ``initialize`` and ``thread/start`` answers never move: the bridge's
   ``initialized`` and the client's next request depend on them, and
   ``thread/started`` is documented to follow the ``thread/start`` answer.
4. **Another thread's events may arrive at any time after ``initialized``.**
   CODEX-NOTES ("Sub-agents"): a child thread's events (status, turns, items)
   are delivered to every connection that was initialized when it was spawned,
   so a sub-agent of some other client's thread reaches this connection too;
   ``thread/started`` and ``thread/status/changed`` of any thread go to every
   initialized connection. Copies of the fixture's own thread notifications,
   with another thread id (and turn ids), keep their order among themselves
   and are inserted anywhere after ``initialized``. The bridge holds such a
   thread's traffic and reads the thread (``thread/read``) to learn its parent;
   Codex answers, a few messages later, that it is another client's top-level
   thread, or another client's sub-agent (whose parent the bridge then reads
   too), or that it cannot be read. Either way no session of this client is
   its parent, so nothing of it may reach the client: the transcript is the
   fixture's own, line for line, for a client that declared ``subagents`` too.

How the recording is rebuilt: the client's and Codex's messages (and events)
are put in the new order, and a fresh engine is run over them to record what
the bridge sends Codex where it sends it (``rebuild``); each of those must be
one the fixture has (a legal reordering does not change what the bridge asks),
and Codex's answers are renumbered to the ids the engine allocated.

Everything else (the turn's item stream, ``error``, ``turn/started``,
``thread/tokenUsage/updated``, ``turn/completed``, and all ``from_client`` and
``to_codex`` records) keeps its recorded order.

One more property holds of every fixture as recorded, and of every reordering:
**a turn's updates all precede its end** (ACP's prompt turn ends with the
prompt's answer; v2's with the session's ``idle`` ``state_update``). See
``assert_turns_end_last`` for the precise rule.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.engine import Engine, ToCodex
from bridge.recording import Recording, Transcript, parse_recording, read_recording, replay
from bridge.recording.format import EndRecord, Entry, EventRecord, MessageRecord, encode_record
from bridge.recording.redact import Redactor
from tests.support.acp_schema import ConversationValidator
from tests.support.fixture_sets import (
    FIXTURES,
    all_names,
    prefixed,
    property_over,
    reordering_settings,
)
from tests.support.reading import direction

#: In both fixture sets: the engine must understand both versions' traffic.
NAMES = prefixed(["streamed_answer", "reasoning", "cancel_mid_stream", "failed_turn", "bad_input"])

#: Rule 1: not items of the turn, sent by other tasks than the turn's item stream.
ANYWHERE_IN_TURN = frozenset(
    {
        "account/rateLimits/updated",
        "configWarning",
        "mcpServer/startupStatus/updated",
        "remoteControl/status/changed",
    }
)
BEFORE_FIRST_ITEM = frozenset({"warning"})
BETWEEN_ITEMS = frozenset({"thread/status/changed", "thread/readState/changed"})
FLOATING = ANYWHERE_IN_TURN | BEFORE_FIRST_ITEM | BETWEEN_ITEMS
#: Rule 2: what Codex sends a connection at start-up.
STARTUP = frozenset(
    {"configWarning", "remoteControl/status/changed", "mcpServer/startupStatus/updated"}
)
#: Rule 3: answers that may come after some of the turn's notifications.
LATE_ANSWERS = frozenset({"turn/start", "turn/interrupt"})

#: Ids of the other threads and turns (rule 4): no fixture id starts like this.
SIBLING = "01a22acf-000"

SETTINGS = reordering_settings(5000)


# -- what may move where ------------------------------------------------------------------


@dataclass
class Moves:
    """A fixture's records and the constraints a legal reordering keeps.

    Every record is a node (its index in ``entries``). ``before[n]`` are the
    nodes that must precede ``n``; a movable node may go anywhere strictly
    between its ``window`` bounds (node indices) that the constraints allow.
    """

    recording: Recording
    entries: list[Entry]
    messages: list[dict[str, Any] | None]
    before: dict[int, set[int]] = field(default_factory=dict)
    floating: dict[int, tuple[int, int]] = field(default_factory=dict)
    late_answers: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Thread notifications that can be replayed as another thread's (rule 4).
    thread_notifications: list[int] = field(default_factory=list)
    initialized: int = -1
    thread_ids: set[str] = field(default_factory=set)
    turn_ids: set[str] = field(default_factory=set)


def declaring_subagents(recording: Recording) -> Recording:
    """``recording`` as if its client had declared ``clientCapabilities.subagents``."""
    entries = []
    for entry in recording.entries:
        record = entry.record
        if isinstance(record, MessageRecord) and record.dir == "from_client" and record.message:
            message = msgspec.json.decode(record.data())
            if message.get("method") == "initialize":
                message["params"]["clientCapabilities"]["subagents"] = {}
                raw = msgspec.Raw(msgspec.json.encode(message))
                record = msgspec.structs.replace(record, message=raw)
        entries.append(Entry(entry.line, record))
    capabilities = {**(recording.header.clientCapabilities or {}), "subagents": {}}
    header = msgspec.structs.replace(recording.header, clientCapabilities=capabilities)
    return Recording(recording.path, header, tuple(entries), recording.end)


@cache
def legal_moves(name: str, subagents: bool = False) -> Moves:
    """What may move where in fixture ``name`` (its client declaring ``subagents`` or not)."""
    recording = read_recording(FIXTURES / f"{name}.codex.jsonl")
    if subagents:
        recording = declaring_subagents(recording)
    entries = list(recording.entries)
    messages: list[dict[str, Any] | None] = []
    for entry in entries:
        record = entry.record
        ok = isinstance(record, MessageRecord) and record.message is not msgspec.UNSET
        messages.append(msgspec.json.decode(record.data()) if ok else None)  # type: ignore[union-attr]
    moves = Moves(recording, entries, messages)

    requests: dict[Any, tuple[int, str, dict[str, Any]]] = {}  # Codex request id → ...
    answers: dict[Any, int] = {}
    completed: dict[str, int] = {}  # turn id → its turn/completed
    for i, (entry, message) in enumerate(zip(entries, messages, strict=True)):
        if message is None:
            continue
        where = direction(entry)
        if where == "to_codex":
            if message.get("method") == "initialized":
                moves.initialized = i
            elif "id" in message:
                requests[message["id"]] = (i, message["method"], message.get("params") or {})
        elif where == "from_codex":
            if "method" not in message:
                answers[message["id"]] = i
            elif message["method"] == "turn/completed":
                completed[message["params"]["turn"]["id"]] = i
    assert moves.initialized >= 0

    # Each turn: (turn/start request, turn/completed, thread).
    turns: dict[str, tuple[int, int, str]] = {}
    turn_of_answer: dict[int, str] = {}
    for rid, (i, method, params) in requests.items():
        answer = messages[answers[rid]] if rid in answers else None
        if answer is None or "result" not in answer:
            continue
        if method == "thread/start":
            moves.thread_ids.add(answer["result"]["thread"]["id"])
        elif method == "turn/start":
            turn_id = answer["result"]["turn"]["id"]
            turns[turn_id] = (i, completed[turn_id], params["threadId"])
            moves.turn_ids.add(turn_id)
        if method in LATE_ANSWERS:  # the turn it started, or the turn it interrupts
            turn_of_answer[answers[rid]] = params.get("turnId") or answer["result"]["turn"]["id"]

    def item_events(start: int, end: int, thread: str) -> list[int]:
        return [
            j
            for j in range(start + 1, end)
            if direction(entries[j]) == "from_codex"
            and (m := messages[j]) is not None
            and str(m.get("method", "")).startswith("item/")
            and m["params"].get("threadId") == thread
        ]

    def window(i: int, method: str, thread: str | None) -> tuple[int, int] | None:
        for start, end, turn_thread in turns.values():
            if not (start < i < end and thread in (None, turn_thread)):
                continue
            items = item_events(start, end, turn_thread)
            if method in BEFORE_FIRST_ITEM:
                return (start, min([end, *items])) if all(i < j for j in items) else None
            if method in BETWEEN_ITEMS:
                return max([start, *(j for j in items if j < i)]), min(
                    [end, *(j for j in items if j > i)]
                )
            return start, end
        return None

    for i, (entry, message) in enumerate(zip(entries, messages, strict=True)):
        if message is None or direction(entry) != "from_codex":
            continue
        method = message.get("method")
        params = message.get("params") or {}
        if method in FLOATING:
            bounds = window(i, method, params.get("threadId"))
            if bounds is None and method in STARTUP and i > moves.initialized:
                later = [a for a in answers.values() if a > i]
                bounds = (moves.initialized, min(later, default=len(entries)))
            if bounds is not None:
                moves.floating[i] = bounds
        elif method is None and i in turn_of_answer:
            _start, end, _thread = turns[turn_of_answer[i]]
            following = [
                j for j in range(i + 1, len(entries)) if direction(entries[j]) != "from_codex"
            ]
            moves.late_answers[i] = (i, min([end, *following[:1]]))
        if method == "thread/started" or (method is not None and "threadId" in params):
            moves.thread_notifications.append(i)

    movable = set(moves.floating) | set(moves.late_answers)
    anchored = [i for i in range(len(entries)) if i not in movable]
    moves.before = {i: set() for i in range(len(entries))}
    for previous, i in itertools.pairwise(anchored):
        moves.before[i].add(previous)
    last_of_kind: dict[tuple[str, Any], int] = {}  # (method, thread) → its latest floating node
    for i, (lo, hi) in sorted(moves.floating.items()):
        message = messages[i]
        assert message is not None
        kind = (message["method"], (message.get("params") or {}).get("threadId"))
        moves.before[i].add(lo)
        moves.before[hi].add(i)
        if kind in last_of_kind:
            moves.before[i].add(last_of_kind[kind])
        last_of_kind[kind] = i
    for i, (_lo, hi) in moves.late_answers.items():
        predecessor = max(a for a in anchored if a < i)  # never earlier than recorded
        moves.before[i].add(predecessor)
        moves.before[hi].add(i)
    return moves


# -- building a reordered recording -----------------------------------------------------------


Choose = Callable[[int, int], int]


class Reordered:
    """A reordered recording's bytes; its repr (what hypothesis prints when a
    property fails) is each message's fixture line and kind, in the new order."""

    def __init__(self, data: bytes, order: tuple[str, ...]) -> None:
        self.data, self.order = data, order

    def __repr__(self) -> str:
        return f"Reordered({', '.join(self.order)})"


def _record_label(record: MessageRecord | EventRecord, line: int | None) -> str:
    if not isinstance(record, MessageRecord):
        return f"{line}:{record.event}"
    message = msgspec.json.decode(record.data()) if record.message is not msgspec.UNSET else {}
    what = (message.get("method") or f"answer#{message.get('id')}") if message else "text"
    return f"{line}:{what}" if line is not None else f"other-thread:{what}"


def sibling_copy(moves: Moves, i: int) -> bytes:
    """Entry ``i`` as if it were about another thread (and its turns) this client never started."""
    data = moves.entries[i].record.data()  # type: ignore[union-attr]
    for n, thread in enumerate(sorted(moves.thread_ids)):
        data = data.replace(thread.encode(), f"{SIBLING}0-7000-8000-{n:012d}".encode())
    for n, turn in enumerate(sorted(moves.turn_ids)):
        data = data.replace(turn.encode(), f"{SIBLING}1-7000-8000-{n:012d}".encode())
    return data


#: How Codex answers the bridge's ``thread/read`` of another thread: after how many
#: more of the recording's messages, and the answer (``result`` or ``error``).
ReadAnswer = Callable[[str], tuple[int, dict[str, Any]]]

#: The parent of a sibling that is itself another client's sub-agent (rule 4).
SIBLING_PARENT = f"{SIBLING}2-7000-8000-000000000000"


def thread_read_answer(moves: Moves, thread: str, parent: str | None) -> dict[str, Any]:
    """``thread/read``'s answer for ``thread``, shaped like the fixture's own thread
    (its ``thread/start`` answer), with the given ``parentThreadId``."""
    started = next(
        m
        for m, e in zip(moves.messages, moves.entries, strict=True)
        if m is not None and direction(e) == "from_codex" and "thread" in (m.get("result") or {})
    )
    stored = dict(started["result"]["thread"])
    stored.update(id=thread, sessionId=thread, parentThreadId=parent, turns=[])
    if parent is not None:
        stored.update(agentNickname="Noether", agentRole="explorer")
    return {"result": {"thread": stored}}


def top_level(moves: Moves) -> ReadAnswer:
    return lambda thread: (0, thread_read_answer(moves, thread, None))


def reordered(
    moves: Moves,
    choose: Choose,
    *,
    floating: bool,
    late_answers: bool,
    siblings: list[int],
    read_answer: ReadAnswer | None = None,
) -> Reordered:
    """A legal interleaving: ``choose(lo, hi)`` places each movable record after node ``lo`` and before ``hi``."""
    n = len(moves.entries)
    key = {i: float(i) for i in range(n)}
    before = {i: set(b) for i, b in moves.before.items()}
    if floating:
        for i, (lo, hi) in moves.floating.items():
            key[i] = choose(lo, hi - 1) + 0.5
    if late_answers:
        for i, (lo, hi) in moves.late_answers.items():
            key[i] = choose(lo, hi - 1) + 0.5
    records: dict[int, MessageRecord | EventRecord] = {
        i: e.record for i, e in enumerate(moves.entries)
    }
    previous = moves.initialized
    for k, source in enumerate(siblings):
        node = n + k
        records[node] = MessageRecord(
            t=0.0, dir="from_codex", message=msgspec.Raw(sibling_copy(moves, source))
        )
        key[node] = choose(moves.initialized, n - 1) + 0.25
        before[node] = {previous}
        previous = node

    order: list[int] = []
    done: set[int] = set()
    remaining = set(records)
    while remaining:
        ready = [i for i in remaining if before[i] <= done]
        pick = min(ready, key=lambda i: (key[i], i))
        order.append(pick)
        done.add(pick)
        remaining.discard(pick)
    inputs = [(records[i], moves.entries[i].line if i < n else None) for i in order]
    return rebuild(moves, inputs, read_answer or top_level(moves))


def rebuild(
    moves: Moves,
    inputs: list[tuple[MessageRecord | EventRecord, int | None]],
    read_answer: ReadAnswer,
) -> Reordered:
    """The recording of ``inputs`` (in their new order) as a fresh bridge sees it.

    What the bridge sends Codex is not moved with the rest: a fresh engine is
    run over the inputs and its messages to Codex are recorded where it sends
    them, so the replay meets exactly the traffic it expects. Each of them must
    be one the fixture has (same method and params; a legal reordering does not
    change what the bridge asks), except the ``thread/read`` of another thread
    (rule 4), which Codex answers with ``read_answer``. The fixture's answers
    are renumbered to the request ids the engine allocated.
    """
    engine = Engine(thread_config=(moves.recording.header.engine or {}).get("threadConfig"))
    redactor = Redactor()
    out: list[tuple[MessageRecord | EventRecord, str]] = []
    asked: list[dict[str, Any]] = []  # the engine's requests no fixture record paired yet
    ids: dict[Any, Any] = {}  # fixture request id → the engine's
    scripted: list[list[Any]] = []  # [messages still to wait, Codex's answer]

    def sent(effects: list[Any]) -> None:
        for effect in effects:
            if not isinstance(effect, ToCodex):
                continue
            message = msgspec.json.decode(effect.data)
            raw = msgspec.Raw(msgspec.json.encode(redactor.value(message)))
            label = f"bridge:{message.get('method') or 'answer'}"
            out.append((MessageRecord(t=0.0, dir="to_codex", message=raw), label))
            if "method" not in message or "id" not in message:
                continue
            thread = str((message.get("params") or {}).get("threadId", ""))
            if message["method"] == "thread/read" and thread.startswith(SIBLING):
                wait, answer = read_answer(thread)
                scripted.append([wait, {"id": message["id"], **answer}])
            else:
                asked.append(message)

    def feed(record: MessageRecord | EventRecord, label: str) -> None:
        out.append((record, label))
        if isinstance(record, EventRecord):
            if record.event == "codex_lost":
                sent(engine.codex_lost(record.reason or "Codex was lost"))
            elif record.event == "client_lost":
                sent(engine.client_lost())
        elif record.dir == "from_client":
            sent(engine.receive_client(record.data()))
        else:
            sent(engine.receive_codex(record.data()))

    def answer_due(flush: bool) -> None:
        """Feed Codex's scripted answers whose time has come (all of them: ``flush``)."""
        for waiting in scripted:
            waiting[0] -= 1
        while due := [s for s in scripted if flush or s[0] < 0]:
            scripted[:] = [s for s in scripted if all(s is not d for d in due)]
            for _wait, answer in due:
                data = msgspec.Raw(msgspec.json.encode(answer))
                feed(MessageRecord(t=0.0, dir="from_codex", message=data), "other-thread:answer")

    sent(engine.start())
    for record, line in inputs:
        label = _record_label(record, line)
        if isinstance(record, EventRecord):
            answer_due(flush=True)  # Codex answered before the end
            feed(record, label)
            continue
        message = msgspec.json.decode(record.data()) if record.message is not msgspec.UNSET else {}
        if record.dir == "to_codex":
            if "method" in message and "id" in message:
                mine = next(
                    (
                        m
                        for m in asked
                        if m["method"] == message["method"]
                        and redactor.value(m.get("params")) == message.get("params")
                    ),
                    None,
                )
                assert mine is not None, (
                    f"in this legal order the bridge no longer sends Codex {record.data().decode()}"
                )
                asked.remove(mine)
                ids[message["id"]] = mine["id"]
            continue  # the engine's own message was recorded when it sent it
        if record.dir == "from_codex" and "method" not in message and line is not None:
            message["id"] = ids[message["id"]]
            record = MessageRecord(
                t=0.0, dir="from_codex", message=msgspec.Raw(msgspec.json.encode(message))
            )
        feed(record, label)
        answer_due(flush=False)
    answer_due(flush=True)
    assert not asked, f"in this legal order the bridge also sends Codex {asked}"

    header = msgspec.structs.replace(
        moves.recording.header,
        synthetic=True,
        note="a legal reordering of a real recording (tests/test_replay_properties.py)",
    )
    lines = [encode_record(header)]
    for position, record in enumerate(record for record, _ in out):
        lines.append(encode_record(msgspec.structs.replace(record, t=position / 1000)))
    count = sum(1 for record, _ in out if isinstance(record, MessageRecord))
    lines.append(encode_record(EndRecord(t=len(out) / 1000, messages=count)))
    return Reordered(b"".join(lines), tuple(label for _, label in out))


@st.composite
def read_answers(draw: st.DrawFn, moves: Moves) -> ReadAnswer:
    """Codex's answers to the bridge's reads of another thread: a top-level thread of
    another client, another client's sub-agent (whose parent is read in turn), or a
    thread Codex cannot read; each after a while."""

    def answer(thread: str) -> tuple[int, dict[str, Any]]:
        wait = draw(st.integers(0, 6))
        if thread == SIBLING_PARENT:
            kind = draw(st.sampled_from(["top-level", "unreadable"]))
        else:
            kind = draw(st.sampled_from(["top-level", "child of another thread", "unreadable"]))
        if kind == "unreadable":
            return wait, {"error": {"code": -32600, "message": f"thread not found: {thread}"}}
        parent = SIBLING_PARENT if kind == "child of another thread" else None
        return wait, thread_read_answer(moves, thread, parent)

    return answer


@st.composite
def reorderings(
    draw: st.DrawFn,
    name: str,
    *,
    floating: bool = False,
    late_answers: bool = False,
    siblings: bool = False,
    subagents: bool = False,
) -> Reordered:
    moves = legal_moves(name, subagents)
    chosen: list[int] = []
    if siblings:
        pool = moves.thread_notifications
        picked = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=12, unique=True))
        chosen = [pool[p] for p in sorted(picked)]
    return reordered(
        moves,
        lambda lo, hi: draw(st.integers(lo, hi)),
        floating=floating,
        late_answers=late_answers,
        siblings=chosen,
        read_answer=draw(read_answers(moves)),
    )


# -- what the user sees ------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    #: (session, "agent_message_chunk" | "agent_thought_chunk") → the text, concatenated.
    text: dict[tuple[str, str], str]
    #: client request id → the one answer it got (result, or error code and message).
    answers: dict[Any, Any]
    #: how many answers each id got (``None``: answers to unparseable input).
    answer_counts: Counter[Any]


def outcome(transcript: Transcript) -> Outcome:
    text: dict[tuple[str, str], str] = {}
    answers: dict[Any, Any] = {}
    counts: Counter[Any] = Counter()
    for side, message in transcript.conversation:
        if side != "agent":
            continue
        if message.get("method") == "session/update":
            update = message["params"]["update"]
            kind = update["sessionUpdate"]
            if kind in ("agent_message_chunk", "agent_thought_chunk"):
                key = (message["params"]["sessionId"], kind)
                text[key] = text.get(key, "") + update["content"]["text"]
        elif "method" not in message:
            counts[message["id"]] += 1
            if "error" in message:
                answers[message["id"]] = (
                    "error",
                    message["error"]["code"],
                    message["error"]["message"],
                )
            else:
                answers[message["id"]] = ("result", message["result"])
    return Outcome(text, answers, counts)


def client_request_ids(transcript: Transcript) -> list[Any]:
    return [
        m["id"]
        for side, m in transcript.conversation
        if side == "client" and "method" in m and "id" in m
    ]


def prompt_outcomes(transcript: Transcript) -> dict[Any, Any]:
    prompts = {
        m["id"]
        for side, m in transcript.conversation
        if side == "client" and m.get("method") == "session/prompt"
    }
    answers = outcome(transcript).answers
    return {
        rid: answer[1].get("stopReason") if answer[0] == "result" else answer[1:]
        for rid, answer in answers.items()
        if rid in prompts
    }


@cache
def original(name: str, subagents: bool = False) -> Transcript:
    """The fixture's own transcript (for a client declaring ``subagents``: as rebuilt, unmoved)."""
    if subagents:
        moves = legal_moves(name, subagents)
        unmoved = rebuild(moves, [(e.record, e.line) for e in moves.entries], top_level(moves))
        return replay(parse_recording(unmoved.data))
    transcript = replay(read_recording(FIXTURES / f"{name}.codex.jsonl"))
    assert transcript.text() == (FIXTURES / f"{name}.acp.jsonl").read_text()
    return transcript


def assert_same_user_visible_outcome(
    name: str, reordering: Reordered, subagents: bool = False
) -> Transcript:
    recording = parse_recording(reordering.data, f"{name}.reordered.codex.jsonl")
    transcript = replay(recording, check=True)  # RecordingError on any RFD violation
    declared = recording.header.clientCapabilities or {}
    validator = ConversationValidator(unstable=declared.get("subagents") is not None)
    for side, message in transcript.conversation:
        if side == "client":
            validator.client_sent(message)
        else:
            validator.agent_sent(message)
    expected, actual = outcome(original(name, subagents)), outcome(transcript)
    assert actual.text == expected.text
    for rid in client_request_ids(transcript):
        assert actual.answer_counts[rid] == 1, (
            f"request {rid!r} answered {actual.answer_counts[rid]} times"
        )
    assert actual.answer_counts == expected.answer_counts
    assert actual.answers == expected.answers
    assert prompt_outcomes(transcript) == prompt_outcomes(original(name, subagents))
    assert_turns_end_last(transcript)
    return transcript


# -- a turn's updates precede its end --------------------------------------------------------------

FINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass
class TurnWindow:
    session: str
    #: Conversation indices of the turn's start and of its end (the answer, or v2's idle).
    start: int
    end: int
    stop_reason: Any


def turn_windows(transcript: Transcript) -> list[TurnWindow]:
    """Each prompt turn of the conversation. v1: from the ``session/prompt`` request to its
    answer (result or error). v2 (whose prompt is answered as soon as it is inserted): from
    the session's ``running`` ``state_update`` to its next ``idle`` one."""
    conversation = transcript.conversation
    v2 = any(
        side == "agent" and message.get("result", {}).get("protocolVersion") == 2
        for side, message in conversation[:2]
        if isinstance(message.get("result"), dict)
    )
    windows: list[TurnWindow] = []
    prompts: dict[Any, tuple[str, int]] = {}
    running: dict[str, int] = {}
    for n, (side, message) in enumerate(conversation):
        if side == "client" and message.get("method") == "session/prompt" and "id" in message:
            prompts[message["id"]] = (message["params"]["sessionId"], n)
        elif side != "agent":
            continue
        elif not v2 and "method" not in message and message.get("id") in prompts:
            session, start = prompts.pop(message["id"])
            result = message.get("result")
            stop = result.get("stopReason") if isinstance(result, dict) else "error"
            windows.append(TurnWindow(session, start, n, stop))
        elif v2 and message.get("method") == "session/update":
            session = message["params"]["sessionId"]
            update = message["params"]["update"]
            if update["sessionUpdate"] != "state_update":
                continue
            if update["state"] == "running":
                running.setdefault(session, n)
            elif update["state"] == "idle" and session in running:
                windows.append(TurnWindow(session, running.pop(session), n, update["stopReason"]))
    return windows


def assert_turns_end_last(transcript: Transcript) -> None:
    """No update of a turn comes after the turn's end. Precisely, for each turn window
    (:func:`turn_windows`) on session S, the turn's tool calls being those S was first told
    of inside the window (``tool_call``, or v2's first ``tool_call_update`` upsert):

    - no ``session/update`` on S names one of the turn's tool calls after its end;
    - a cancelled turn leaves none of its tool calls open: each has a final status
      (``completed``, ``failed``, v2's ``cancelled``) by the end;
    - after a cancelled turn's end, no sub-agent state reaches S (``subagent_update`` with a
      ``state``) before S's next turn starts: the cancel stopped their work, and their
      ``idle`` precedes the answer.
    """
    conversation = transcript.conversation
    updates = [
        (n, message["params"]["sessionId"], message["params"]["update"])
        for n, (side, message) in enumerate(conversation)
        if side == "agent" and message.get("method") == "session/update"
    ]
    windows = turn_windows(transcript)
    announced: set[tuple[str, str]] = set()
    for window in sorted(windows, key=lambda w: w.start):
        ours: dict[str, str | None] = {}
        for n, session, update in updates:
            call_id = update.get("toolCallId")
            if session != window.session or call_id is None or n > window.end:
                continue
            key = (session, call_id)
            if key not in announced and n > window.start:
                announced.add(key)
                ours[call_id] = None
            if call_id in ours and "status" in update:
                ours[call_id] = update["status"]
        late = [
            (n, update["sessionUpdate"], update.get("toolCallId"))
            for n, session, update in updates
            if session == window.session and n > window.end and update.get("toolCallId") in ours
        ]
        assert not late, f"turn ended at message {window.end}; its tool calls after: {late}"
        if window.stop_reason != "cancelled":
            continue
        still_open = {call_id: status for call_id, status in ours.items() if status not in FINAL}
        assert not still_open, f"cancelled turn ended at {window.end} leaving open: {still_open}"
        next_start = min(
            (w.start for w in windows if w.session == window.session and w.start > window.end),
            default=len(conversation),
        )
        states = [
            (n, update["sessionId"], update["state"])
            for n, session, update in updates
            if session == window.session
            and window.end < n < next_start
            and update["sessionUpdate"] == "subagent_update"
            and update.get("state") is not None
        ]
        assert not states, f"cancelled turn ended at {window.end}; sub-agent states after: {states}"


ALL_FIXTURES = all_names()


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_no_update_of_a_turn_comes_after_its_end(name: str) -> None:
    transcript = original(name)
    assert_turns_end_last(transcript)


def test_the_turn_end_property_sees_turns_and_their_tool_calls() -> None:
    """Not vacuous: the fixtures hold cancelled turns with tool calls, v1 and v2."""
    cancelled = [
        name
        for name in ALL_FIXTURES
        for window in turn_windows(original(name))
        if window.stop_reason == "cancelled"
    ]
    expected = prefixed(["cancel_stops_command", "cancel_parent_cascades", "v2_cancel_mid_stream"])
    assert set(expected) <= set(cancelled)


# -- the properties -----------------------------------------------------------------------------


def test_every_fixture_has_records_the_properties_move() -> None:
    """The properties below are not vacuous: each fixture offers them something to move."""
    for name in NAMES:
        moves = legal_moves(name)
        assert not moves.recording.header.synthetic, f"{name} is a real recording"
        assert len(moves.floating) >= 4, name
        assert len(moves.late_answers) >= 1, name
        assert len(moves.thread_notifications) >= 10, name
        assert original(name).conversation, name
        # Declaring subagents changes the initialize answer, not what the turns show.
        with_subagents = original(name, subagents=True)
        assert outcome(with_subagents).text == outcome(original(name)).text, name
        assert prompt_outcomes(with_subagents) == prompt_outcomes(original(name)), name
    for cancel_mid_stream in prefixed(["cancel_mid_stream"]):
        cancel = legal_moves(cancel_mid_stream)
        assert len(cancel.late_answers) == 3, "two turn/start answers and a turn/interrupt answer"


#: A property over every fixture, on drawn data.
OVER_FIXTURES = property_over(NAMES, SETTINGS)


@pytest.mark.parametrize(
    "moved",
    [
        pytest.param("floating", id="notifications floating within their turn"),
        pytest.param("late_answers", id="late turn answers"),
    ],
)
@OVER_FIXTURES
def test_one_kind_of_legal_move_changes_nothing_the_user_sees(
    moved: str, name: str, data: st.DataObject
) -> None:
    assert_same_user_visible_outcome(name, data.draw(reorderings(name, **{moved: True})))


CLIENTS = pytest.mark.parametrize(
    "subagents", [False, True], ids=["plain client", "client with subagents"]
)


def over_fixtures_and_clients(test: Callable[..., None]) -> Callable[..., None]:
    """A property test run on every fixture, for each kind of client, on drawn data."""
    drawn = SETTINGS(given(data=st.data())(test))
    return pytest.mark.parametrize("name", NAMES)(CLIENTS(drawn))  # type: ignore[no-any-return]


@over_fixtures_and_clients
def test_another_threads_events_never_reach_the_client(
    name: str, subagents: bool, data: st.DataObject
) -> None:
    reordering = data.draw(reorderings(name, siblings=True, subagents=subagents))
    transcript = assert_same_user_visible_outcome(name, reordering, subagents)
    assert SIBLING not in transcript.text()
    assert transcript.lines == original(name, subagents).lines


@over_fixtures_and_clients
def test_all_legal_reorderings_at_once_change_nothing_the_user_sees(
    name: str, subagents: bool, data: st.DataObject
) -> None:
    everything = reorderings(
        name, floating=True, late_answers=True, siblings=True, subagents=subagents
    )
    assert_same_user_visible_outcome(name, data.draw(everything), subagents)


@pytest.mark.parametrize("name", NAMES)
@CLIENTS
@pytest.mark.parametrize("extreme", ["earliest", "latest"])
def test_every_record_moved_as_far_as_it_legally_goes(
    name: str, subagents: bool, extreme: str
) -> None:
    """The corners hypothesis may not reach: everything as early, or as late, as allowed."""
    moves = legal_moves(name, subagents)
    choose: Choose = (lambda lo, hi: lo) if extreme == "earliest" else (lambda lo, hi: hi)
    reordering = reordered(
        moves, choose, floating=True, late_answers=True, siblings=moves.thread_notifications
    )
    transcript = assert_same_user_visible_outcome(name, reordering, subagents)
    assert SIBLING not in transcript.text()
    # The reordering did reorder: the fixture's own inputs (what the client and
    # Codex sent, and events), all there, in another order.
    inputs = [e.line for e in moves.entries if direction(e) != "to_codex"]
    moved = [int(label.split(":")[0]) for label in reordering.order if label[0].isdigit()]
    assert sorted(moved) == inputs
    assert moved != inputs

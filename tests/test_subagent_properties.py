"""Property tests: the sub-agent fixtures with their threads' events interleaved otherwise.

Each sub-agent fixture is one interleaving of a parent's and its children's events that the
real Codex 0.169 happened to produce. Codex writes each thread's events from that thread's own
task, so the threads race: a child's events may come before, between or after its parent's,
and before the parent's spawn item names the child (CODEX-NOTES, "Sub-agents"). Hypothesis
draws such interleavings, writes them back as a recording, replays it with the RFD checker on,
and asserts that nothing the user sees depends on the interleaving:

- the checker passes (announcement before any traffic of a child, its permission requests
  included; no subagent update for a client without the capability; one answer per request);
- every message validates against the unstable ACP schema;
- each session's streamed text, its session messages, each child's association (parent, title)
  and work-state snapshots, and the permission requests (which session asks, what) are the
  original fixture's; every client request gets the original answer.

What may move (:func:`plan`), deliberately conservative:

1. **Barriers keep their places.** Everything the client sent, everything the bridge sent
   Codex, events, and Codex's answers to requests (other than ``thread/read``) keep their
   recorded order, and nothing crosses them. That is what keeps the recording replayable: the
   engine's requests to Codex must stay what was recorded, at the point where they were
   recorded, and what the client did next may have depended on what it had seen. So the
   bridge's own ``thread/read`` of a child is still sent after the child's first event (which
   is what makes the engine send it) and a permission request still comes before the client's
   answer to it.
2. **Between two barriers, threads interleave freely**, each thread's notifications and
   requests keeping their order (``thread/status/changed`` included: a conservative choice).
   Notifications about no thread (rate limits) keep their order among themselves.
3. **Answers to the bridge's ``thread/read`` may come late**, up to the next barrier: Codex
   serves them on another task than the thread's events, so a child's events (its permission
   request too) may arrive before the bridge learns whose child it is.
4. **Causality:** a child's events come after the parent's ``spawnAgent`` item started (the
   child does not exist before), and the events of a child's later turn after the parent's
   ``sendInput`` item that asked for it started.

Hence the RFD scenario "Deliver a child permission callback before spawn metadata": in
``child_approval`` the child's request can come before the parent's spawn item completes and
before the ``thread/read`` answer; :func:`test_a_child_permission_callback_before_spawn_metadata_is_held_until_announced`
builds exactly that ordering.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import strategies as st

from bridge.recording import Recording, Transcript, parse_recording, read_recording, replay
from bridge.recording.format import EndRecord, Entry, MessageRecord, encode_record
from tests.support.acp_schema import ConversationValidator
from tests.support.fixture_sets import FIXTURES, prefixed, property_over, reordering_settings
from tests.support.reading import direction, text_of

#: In both fixture sets (``fixtures/`` and ``fixtures/codex-0.169/``).
NAMES = prefixed(
    [
        "spawn_and_wait",
        "send_input_reuse",
        "nested_spawn",
        "child_approval",
        "cancel_child",
        "cancel_parent_cascades",
        "child_fails",
        "subagents_without_capability",
    ]
)
#: Collab tools that make a child start work (its later events follow the item's start).
STARTS_CHILD_WORK = frozenset({"spawnAgent", "sendInput", "resumeAgent"})

SETTINGS = reordering_settings(10_000)


# -- what may move where ---------------------------------------------------------------------------


@dataclass
class Plan:
    """A recording's records and the order constraints a legal interleaving keeps.

    Nodes are indices into ``entries``. ``before[n]``: nodes that must precede ``n``.
    ``movable``: the nodes that are not barriers. ``thread[n]``: the Codex thread a movable
    node belongs to (``None``: no thread, or the answer to a ``thread/read``).
    """

    recording: Recording
    entries: list[Entry]
    messages: list[dict[str, Any] | None]
    before: dict[int, set[int]] = field(default_factory=dict)
    movable: set[int] = field(default_factory=set)
    thread: dict[int, str | None] = field(default_factory=dict)
    #: Answers to the bridge's thread/read requests (rule 3).
    read_answers: set[int] = field(default_factory=set)
    #: The root sessions' threads (the ones the client created).
    roots: set[str] = field(default_factory=set)


def _message(entry: Entry) -> dict[str, Any] | None:
    record = entry.record
    if isinstance(record, MessageRecord) and record.message is not msgspec.UNSET:
        decoded = msgspec.json.decode(record.data())
        return decoded if isinstance(decoded, dict) else None
    return None


def plan_of(recording: Recording) -> Plan:
    entries = list(recording.entries)
    messages = [_message(e) for e in entries]
    plan = Plan(recording, entries, messages)

    read_requests: set[Any] = set()
    for i, (entry, message) in enumerate(zip(entries, messages, strict=True)):
        if message is None:
            continue
        where = direction(entry)
        if where == "to_codex" and message.get("method") == "thread/read":
            read_requests.add(message["id"])
        elif where == "from_codex":
            if "method" not in message:
                if message.get("id") in read_requests:
                    plan.read_answers.add(i)
                    plan.movable.add(i)
                    plan.thread[i] = None
                elif "result" in message and isinstance(message["result"].get("thread"), dict):
                    plan.roots.add(message["result"]["thread"]["id"])
            elif message["method"] != "thread/started":
                plan.movable.add(i)
                plan.thread[i] = (message.get("params") or {}).get("threadId")

    barriers = [i for i in range(len(entries)) if i not in plan.movable]
    plan.before = {i: set() for i in range(len(entries))}
    for previous, barrier in itertools.pairwise(barriers):
        plan.before[barrier].add(previous)
    # Rule 1: each movable node stays between the barriers around it.
    for i in plan.movable:
        lower = [b for b in barriers if b < i]
        upper = [b for b in barriers if b > i]
        if lower:
            plan.before[i].add(lower[-1])
        if upper:
            plan.before[upper[0]].add(i)
    # Rule 2: per-thread order (no-thread notifications keep theirs too).
    last: dict[Any, int] = {}
    for i in sorted(plan.movable - plan.read_answers):
        key = plan.thread[i]
        if key in last:
            plan.before[i].add(last[key])
        last[key] = i
    # Rule 4: a child's events after the collab item that made it work.
    starts: dict[tuple[str, str], int] = {}  # (thread, item id) → its item/started
    for i in sorted(plan.movable):
        message = messages[i]
        assert message is not None
        params = message.get("params") or {}
        item = params.get("item") if isinstance(params.get("item"), dict) else None
        if item is None or item.get("type") != "collabAgentToolCall":
            continue
        if message["method"] == "item/started":
            starts[(params["threadId"], item["id"])] = i
        elif message["method"] == "item/completed" and item.get("tool") in STARTS_CHILD_WORK:
            start = starts.get((params["threadId"], item["id"]))
            if start is None:
                continue
            for receiver in item.get("receiverThreadIds", []):
                for j in plan.movable:
                    if j > start and plan.thread.get(j) == receiver:
                        plan.before[j].add(start)
    return plan


@cache
def plan(name: str) -> Plan:
    return plan_of(read_recording(FIXTURES / f"{name}.codex.jsonl"))


# -- building a reordered recording ---------------------------------------------------------------


class Reordered:
    """A reordered recording's bytes; its repr (what hypothesis prints on a failure) lists each
    record's fixture line and kind in the new order."""

    def __init__(self, data: bytes, labels: tuple[str, ...]) -> None:
        self.data, self.labels = data, labels

    def __repr__(self) -> str:
        return f"Reordered({', '.join(self.labels)})"


def _plan_label(plan: Plan, i: int) -> str:
    message = plan.messages[i]
    entry = plan.entries[i]
    if message is None:
        return f"{entry.line}:{getattr(entry.record, 'event', 'text')}"
    what = message.get("method") or f"answer#{message.get('id')}"
    thread = plan.thread.get(i)
    return f"{entry.line}:{what}" + (f"@{thread[-6:]}" if thread else "")


def reordered(
    plan: Plan, priority: Callable[[int], float], *, late_reads: bool = True
) -> Reordered:
    """The interleaving that, among the records whose predecessors are placed, always takes
    the one of lowest ``priority`` (the recorded position breaks ties).

    Without ``late_reads``, the answers to the bridge's ``thread/read`` come no later than
    recorded (before every record that followed them): only the threads interleave.
    """
    order: list[int] = []
    done: set[int] = set()
    remaining = set(range(len(plan.entries)))
    waiting = {i: set(b) for i, b in plan.before.items()}
    if not late_reads:
        for answer in plan.read_answers:
            for j in plan.movable:
                if j > answer:
                    waiting[j].add(answer)
    while remaining:
        ready = [i for i in remaining if waiting[i] <= done]
        pick = min(ready, key=lambda i: (priority(i) if i in plan.movable else 0.0, i))
        order.append(pick)
        done.add(pick)
        remaining.discard(pick)
    header = msgspec.structs.replace(
        plan.recording.header,
        synthetic=True,
        note="a legal interleaving of a real recording (tests/test_subagent_properties.py)",
    )
    out = [encode_record(header)]
    for position, i in enumerate(order):
        out.append(
            encode_record(msgspec.structs.replace(plan.entries[i].record, t=position / 1000))
        )
    count = sum(1 for i in order if isinstance(plan.entries[i].record, MessageRecord))
    out.append(encode_record(EndRecord(t=len(order) / 1000, messages=count)))
    return Reordered(b"".join(out), tuple(_plan_label(plan, i) for i in order))


@st.composite
def interleavings(draw: st.DrawFn, name: str, *, late_reads: bool) -> Reordered:
    """Each thread runs at a drawn pace (a bias per thread), each record with drawn jitter; with
    ``late_reads``, the ``thread/read`` answers come at drawn places too."""
    p = plan(name)
    keys = sorted({str(p.thread[i]) for i in p.movable})
    paces = draw(st.lists(st.integers(0, 3), min_size=len(keys), max_size=len(keys)))
    bias = dict(zip(keys, paces, strict=True))
    jitter = draw(st.randoms(use_true_random=False))
    noise = {i: jitter.random() * 2 for i in p.movable}
    return reordered(p, lambda i: bias[str(p.thread[i])] + noise[i], late_reads=late_reads)


def children_first(p: Plan, i: int) -> float:
    """Children's events as early as they may go, the bridge's thread reads answered last."""
    if i in p.read_answers:
        return 3.0
    return 0.0 if p.thread[i] not in p.roots else 2.0


def parents_first(p: Plan, i: int) -> float:
    """The roots' events first, children's as late as they may go, thread reads answered at once."""
    if i in p.read_answers:
        return 0.0
    return 0.0 if p.thread[i] in p.roots else 2.0


# -- what the user sees --------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    #: session → its streamed agent text; its thoughts.
    text: Mapping[str, str]
    thoughts: Mapping[str, str]
    #: session → its session messages: (messageId, sender, recipient, text), in order.
    session_messages: Mapping[str, list[tuple[Any, ...]]]
    #: child → (parent, title) of its announcement.
    associations: Mapping[str, tuple[str, Any]]
    #: child → the state snapshots and capabilities its parent's stream carried, in order.
    snapshots: Mapping[str, list[Any]]
    #: the permission requests: (session, tool call title), in order.
    permissions: list[tuple[str, Any]]
    #: client request id → its answer; and how many answers each got.
    answers: Mapping[Any, Any]
    answer_counts: Mapping[Any, int]


def seen(transcript: Transcript) -> Seen:
    text: dict[str, str] = defaultdict(str)
    thoughts: dict[str, str] = defaultdict(str)
    messages: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    associations: dict[str, tuple[str, Any]] = {}
    snapshots: dict[str, list[Any]] = defaultdict(list)
    permissions: list[tuple[str, Any]] = []
    answers: dict[Any, Any] = {}
    counts: dict[Any, int] = defaultdict(int)
    for side, message in transcript.conversation:
        if side != "agent":
            continue
        method = message.get("method")
        if method == "session/update":
            session, update = message["params"]["sessionId"], message["params"]["update"]
            kind = update["sessionUpdate"]
            if kind == "agent_message_chunk":
                text[session] += text_of([update])
            elif kind == "agent_thought_chunk":
                thoughts[session] += text_of([update], kind)
            elif kind == "session_message":
                body = text_of([update], kind)
                messages[session].append(
                    (
                        update["messageId"],
                        update.get("senderSessionId"),
                        update.get("recipientSessionId"),
                        body,
                    )
                )
            elif kind == "subagent_update":
                child = update["sessionId"]
                associations.setdefault(child, (session, update.get("title")))
                rest = {k: v for k, v in update.items() if k in ("state", "capabilities")}
                if rest:
                    snapshots[child].append(rest)
        elif method == "session/request_permission":
            params = message["params"]
            permissions.append((params["sessionId"], params["toolCall"].get("title")))
        elif method is None:
            counts[message["id"]] += 1
            answers[message["id"]] = message.get("result", message.get("error"))
    return Seen(
        dict(text),
        dict(thoughts),
        dict(messages),
        associations,
        dict(snapshots),
        permissions,
        answers,
        dict(counts),
    )


@cache
def original(name: str) -> Transcript:
    transcript = replay(read_recording(FIXTURES / f"{name}.codex.jsonl"))
    assert transcript.text() == (FIXTURES / f"{name}.acp.jsonl").read_text()
    return transcript


def replay_checked(data: bytes, name: str) -> Transcript:
    """Replay with the RFD checker on (a violation raises) and validate every message."""
    recording = parse_recording(data, f"{name}.reordered.codex.jsonl")
    transcript = replay(recording, check=True)
    declared = recording.header.clientCapabilities or {}
    validator = ConversationValidator(unstable=True)
    assert declared.get("subagents") is not None or not any(
        m.get("params", {}).get("update", {}).get("sessionUpdate") == "subagent_update"
        for side, m in transcript.conversation
        if side == "agent"
    )
    for side, message in transcript.conversation:
        if side == "client":
            validator.client_sent(message)
        else:
            validator.agent_sent(message)
    return transcript


def assert_user_sees_the_same(name: str, reordering: Reordered) -> Transcript:
    transcript = replay_checked(reordering.data, name)
    expected, actual = seen(original(name)), seen(transcript)
    assert actual.text == expected.text
    assert actual.thoughts == expected.thoughts
    # HeldMessage traffic may put a message later among its session's others: compare the contents.
    assert _sorted(actual.session_messages) == _sorted(expected.session_messages)
    assert actual.associations == expected.associations
    assert actual.snapshots == expected.snapshots
    assert actual.permissions == expected.permissions
    assert actual.answers == expected.answers
    assert set(actual.answer_counts.values()) <= {1}, actual.answer_counts
    return transcript


def _sorted(messages: Mapping[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    return {session: sorted(entries, key=repr) for session, entries in messages.items()}


def agent_lines(transcript: Transcript) -> list[dict[str, Any]]:
    return [m for side, m in transcript.conversation if side == "agent"]


# -- the properties ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_each_fixture_has_children_whose_events_can_move(name: str) -> None:
    """Not vacuous: every fixture is real, has a child thread, and its events may interleave."""
    p = plan(name)
    assert not p.recording.header.synthetic, f"{name} is a real recording"
    child_events = [i for i in p.movable if p.thread[i] not in p.roots and p.thread[i]]
    root_events = [i for i in p.movable if p.thread[i] in p.roots]
    assert len(child_events) >= 8 and len(root_events) >= 8
    assert p.read_answers, "the bridge reads a child thread it sees first"
    first = reordered(p, lambda i: children_first(p, i))
    last = reordered(p, lambda i: parents_first(p, i))
    assert first.labels != last.labels


#: A property over every fixture, on drawn data.
OVER_FIXTURES = property_over(NAMES, SETTINGS)


@pytest.mark.parametrize(
    "late_reads",
    [
        pytest.param(False, id="parent and child events interleaved"),
        pytest.param(True, id="late answers to the bridge's thread reads as well"),
    ],
)
@OVER_FIXTURES
def test_interleavings_change_nothing_the_user_sees(
    late_reads: bool, name: str, data: st.DataObject
) -> None:
    assert_user_sees_the_same(name, data.draw(interleavings(name, late_reads=late_reads)))


@pytest.mark.parametrize("name", NAMES)
def test_children_as_early_as_codex_may_send_them_and_thread_reads_answered_last(
    name: str,
) -> None:
    p = plan(name)
    assert_user_sees_the_same(name, reordered(p, lambda i: children_first(p, i)))


@pytest.mark.parametrize("name", NAMES)
def test_children_as_early_as_codex_may_send_them_while_thread_reads_keep_their_place(
    name: str,
) -> None:
    p = plan(name)
    assert_user_sees_the_same(name, reordered(p, lambda i: children_first(p, i), late_reads=False))


@pytest.mark.parametrize("name", NAMES)
def test_children_as_late_as_codex_may_send_them(name: str) -> None:
    p = plan(name)
    assert_user_sees_the_same(name, reordered(p, lambda i: parents_first(p, i)))


@pytest.mark.parametrize(
    ("name", "asks_on_child"),
    [
        (name, asks_on_child)
        for scenario, asks_on_child in (
            ("child_approval", True),
            ("subagents_without_capability", False),
        )
        for name in prefixed([scenario])
    ],
)
def test_a_child_permission_callback_before_spawn_metadata_is_held_until_announced(
    name: str, asks_on_child: bool
) -> None:
    """RFD validation scenario "Deliver a child permission callback before spawn metadata".

    Codex 0.169 and 0.171 sent the child's approval request after the spawn item completed
    in every recording made here, but nothing orders them: the ordering where the request comes
    first, and the bridge's read of the child thread is answered last, is built here. The
    bridge must hold the request until it knows the parent, then ask it on the announced
    child's session (or, for a client without the capability, on the root, naming the agent).
    """
    p = plan(name)
    reordering = reordered(p, lambda i: children_first(p, i))
    labels = [label.split(":", 1)[1] for label in reordering.labels]
    ask = next(
        n
        for n, label in enumerate(labels)
        if label.startswith("item/commandExecution/requestApproval")
    )
    spawned = next(
        n
        for n, (label, i) in enumerate(zip(labels, order_of(p, reordering), strict=True))
        if label.startswith("item/completed") and is_spawn(p.messages[i])
    )
    read_answer = next(n for n, i in enumerate(order_of(p, reordering)) if i in p.read_answers)
    assert ask < spawned and ask < read_answer, "the request precedes the spawn metadata"

    transcript = assert_user_sees_the_same(name, reordering)
    messages = agent_lines(transcript)
    [request] = [m for m in messages if m.get("method") == "session/request_permission"]
    root = next(iter(p.roots))
    if asks_on_child:
        child = request["params"]["sessionId"]
        assert child != root
        announced = next(
            n
            for n, m in enumerate(messages)
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "subagent_update"
            and m["params"]["update"]["sessionId"] == child
        )
        assert announced < messages.index(request)
        assert messages[announced]["params"]["sessionId"] == root
    else:
        assert request["params"]["sessionId"] == root
        assert ": " in request["params"]["toolCall"]["title"], "names the agent that asks"


def order_of(p: Plan, reordering: Reordered) -> list[int]:
    by_line = {e.line: i for i, e in enumerate(p.entries)}
    return [by_line[int(label.split(":", 1)[0])] for label in reordering.labels]


def is_spawn(message: dict[str, Any] | None) -> bool:
    item = ((message or {}).get("params") or {}).get("item") or {}
    return item.get("type") == "collabAgentToolCall" and item.get("tool") == "spawnAgent"

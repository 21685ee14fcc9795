"""Realistic Codex traffic taken from the fixtures, for tests that play Codex themselves.

A :class:`Corpus` holds, from every recording of both fixture sets (``fixtures/`` and
``fixtures/codex-0.169/``, see ``tests/support/fixture_sets.py``):

- each fixture's Codex notifications and server requests in recorded order, with the
  fixture's thread and turn ids and who is whose child, so a test can replay them about
  threads of its own (:func:`rewrite` swaps ids in the encoded text);
- Codex's first successful result for each method the bridge asks (templates for answers);
- every server request Codex made (approvals, questions), and a few it could make;
- a stored thread with history (``thread/read`` with ``includeTurns``), a sub-agent's
  thread, and a completed ``spawnAgent`` item.

Also JSON-RPC classification by the rules of the wire alone, so a test's bookkeeping does
not depend on the bridge's own parser.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeGuard

import msgspec

from bridge.recording.format import MessageRecord, read_recording
from tests.support.fixture_sets import FIXTURES, all_names

UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_THREAD_KEYS = frozenset({"threadId", "senderThreadId", "parentThreadId", "reviewThreadId"})
_TURN_KEYS = frozenset({"turnId", "rootTurnId"})
_OPENERS = frozenset({"thread/start", "thread/resume", "thread/fork"})

Json = Any
RequestId = int | float | str


@dataclass
class FixtureTraffic:
    """One fixture's Codex side: what Codex sent on its own, and the ids it names."""

    name: str
    #: Codex's notifications and server requests, in recorded order (answers left out).
    messages: list[dict[str, Json]] = field(default_factory=list)
    #: Threads the client opened (started, resumed, forked, loaded).
    roots: set[str] = field(default_factory=set)
    #: Sub-agent thread → its parent thread (from thread reads and spawn items).
    parents: dict[str, str] = field(default_factory=dict)
    threads: set[str] = field(default_factory=set)
    #: Turn id → the thread it ran on.
    turn_thread: dict[str, str] = field(default_factory=dict)

    @property
    def asks(self) -> bool:
        """Codex made server requests (approvals, questions) in this fixture."""
        return any("id" in m for m in self.messages)


@dataclass
class Corpus:
    traffic: dict[str, FixtureTraffic]
    #: Codex method → its first successful result in the fixtures.
    results: dict[str, Json]
    #: Server requests Codex may send (``id`` left as recorded).
    requests: list[dict[str, Json]]
    stored_thread: dict[str, Json]
    child_thread: dict[str, Json]
    spawn_item: dict[str, Json]
    turn: dict[str, Json]


def _walk(value: Json) -> Iterator[tuple[str, Json]]:
    """Every (key, value) member of a JSON tree."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key, inner
            yield from _walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner)


def _note_ids(message: dict[str, Json], traffic: FixtureTraffic) -> None:
    params = message.get("params")
    if not isinstance(params, dict):
        return
    thread_of_message = params.get("threadId") if isinstance(params.get("threadId"), str) else None
    for key, value in _walk(message):
        if key in _THREAD_KEYS and isinstance(value, str):
            traffic.threads.add(value)
        elif key == "receiverThreadIds" and isinstance(value, list):
            traffic.threads.update(v for v in value if isinstance(v, str))
        elif key == "agentsStates" and isinstance(value, dict):
            traffic.threads.update(value)
        elif key in _TURN_KEYS and isinstance(value, str) and thread_of_message:
            traffic.turn_thread.setdefault(value, thread_of_message)
        elif (
            key == "turn"
            and isinstance(value, dict)
            and isinstance(value.get("id"), str)
            and thread_of_message
        ):
            traffic.turn_thread.setdefault(value["id"], thread_of_message)
        if (
            key == "item"
            and isinstance(value, dict)
            and value.get("type") == "collabAgentToolCall"
            and value.get("tool") == "spawnAgent"
        ):
            sender = value.get("senderThreadId") or thread_of_message
            for receiver in value.get("receiverThreadIds") or []:
                if isinstance(sender, str) and isinstance(receiver, str):
                    traffic.parents.setdefault(receiver, sender)


@cache
def corpus() -> Corpus:
    traffic: dict[str, FixtureTraffic] = {}
    results: dict[str, Json] = {}
    requests: list[dict[str, Json]] = []
    stored_thread: dict[str, Json] | None = None
    child_thread: dict[str, Json] | None = None
    spawn_item: dict[str, Json] | None = None
    for name in all_names():
        recording = read_recording(FIXTURES / f"{name}.codex.jsonl")
        fixture = traffic[name] = FixtureTraffic(name)
        asked: dict[RequestId, dict[str, Json]] = {}
        for entry in recording.entries:
            record = entry.record
            if not isinstance(record, MessageRecord) or record.message is msgspec.UNSET:
                continue
            message = msgspec.json.decode(record.data())
            if not isinstance(message, dict):
                continue
            if record.dir == "from_client":
                session = (message.get("params") or {}).get("sessionId")
                if message.get("method") in ("session/load", "session/resume") and session:
                    fixture.roots.add(session)
                continue
            if record.dir == "to_codex":
                if "id" in message:
                    asked[message["id"]] = message
                continue
            if "method" in message:
                fixture.messages.append(message)
                _note_ids(message, fixture)
                if "id" in message:
                    requests.append(message)
                item = (message.get("params") or {}).get("item")
                if (
                    spawn_item is None
                    and message["method"] == "item/completed"
                    and isinstance(item, dict)
                    and item.get("tool") == "spawnAgent"
                    and item.get("receiverThreadIds")
                ):
                    spawn_item = item
                continue
            request = asked.get(message["id"]) if valid_id(message.get("id")) else None
            if request is None or "result" not in message:
                continue
            method, result = request["method"], message["result"]
            results.setdefault(method, result)
            thread = result.get("thread") if isinstance(result, dict) else None
            if not isinstance(thread, dict):
                continue
            fixture.threads.add(thread["id"])
            if method in _OPENERS:
                fixture.roots.add(thread["id"])
            if method == "thread/read":
                if thread.get("parentThreadId"):
                    fixture.parents[thread["id"]] = thread["parentThreadId"]
                    child_thread = child_thread or thread
                elif thread.get("turns") and stored_thread is None:
                    stored_thread = thread
    assert stored_thread and child_thread and spawn_item, "the fixtures lost their sub-agents"
    turn = results["turn/start"]["turn"]
    return Corpus(traffic, results, requests, stored_thread, child_thread, spawn_item, turn)


def rewrite(message: Json, ids: Mapping[bytes, str]) -> Json:
    """``message`` with every UUID that ``ids`` names replaced (in keys and values alike)."""
    data = msgspec.json.encode(message)
    swapped = UUID.sub(lambda m: ids[m.group()].encode() if m.group() in ids else m.group(), data)
    return msgspec.json.decode(swapped)


def uuids(message: Json) -> set[bytes]:
    return set(UUID.findall(msgspec.json.encode(message)))


# -- JSON-RPC by the rules of the wire ---------------------------------------------------------


def valid_id(value: Json) -> TypeGuard[RequestId]:
    """An id a request may carry: a string or a number (JSON-RPC 2.0: a Number "SHOULD NOT"
    have a fraction, so one that has is still an id), an integer in what a 64-bit peer holds."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return isinstance(value, str) or (isinstance(value, float) and math.isfinite(value))


def decode(data: bytes) -> tuple[bool, Json]:
    """``(True, value)`` for JSON, ``(False, None)`` for bytes that are not."""
    try:
        return True, msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False, None


def classify(data: bytes) -> tuple[str, RequestId | None]:
    """What one message is, by JSON-RPC 2.0 alone: ``request`` (with its id), ``notification``,
    ``response`` (with its id), or ``invalid`` (with the id it carries, if a usable one).

    Conservative about ``request``: the members a request has, each of the right type, and
    none a response has, so anything it calls a request must be answered; anything odd is
    ``invalid`` and gets at most one (error) reply. Other members are extensions and change
    nothing (Codex stamps its notifications with ``emittedAtMs``).
    """
    ok, obj = decode(data)
    if not ok or not isinstance(obj, dict):
        return "invalid", None
    rid = obj.get("id")
    usable = rid if valid_id(rid) else None
    if obj.get("jsonrpc", "2.0") != "2.0":
        return "invalid", usable
    if "method" not in obj:
        if usable is not None and ("result" in obj or _error_object(obj.get("error"))):
            return "response", usable
        return "invalid", usable
    if not isinstance(obj["method"], str) or {"result", "error"} & set(obj):
        return "invalid", usable
    if "id" not in obj:
        return "notification", None
    return ("request", usable) if usable is not None else ("invalid", None)


def _error_object(value: Json) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("code"), int)
        and not isinstance(value.get("code"), bool)
        and isinstance(value.get("message"), str)
    )


# -- damage ------------------------------------------------------------------------------------

#: Values of every JSON type; a mistyped field gets one of another type than it had.
WRONG_VALUES: tuple[Json, ...] = (None, 0, -1, 1.5, True, "", "x", [], [1], {}, {"x": 1})


def paths(value: Json, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every place in a JSON tree (dict keys and list indices), outermost first."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            found.append((*prefix, key))
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found.append((*prefix, index))
            found += paths(inner, (*prefix, index))
    return found


def same_type(a: Json, b: Json) -> bool:
    return type(a) is type(b)


def replaced(value: Json, path: tuple[str | int, ...], new: Json, *, delete: bool = False) -> Json:
    """A copy of ``value`` with the member at ``path`` set to ``new`` (or removed)."""
    out = copy.deepcopy(value)
    holder = out
    for step in path[:-1]:
        holder = holder[step]
    if delete:
        del holder[path[-1]]
    else:
        holder[path[-1]] = new
    return out


def at(value: Json, path: tuple[str | int, ...]) -> Json:
    for step in path:
        value = value[step]
    return value

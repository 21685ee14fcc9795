"""Property test: whatever either side sends, in whatever order, the engine stays sound.

The test plays both peers of one pure :class:`~bridge.engine.Engine`, one hypothesis-drawn
step at a time:

- **the client** initializes (declaring ``subagents`` and elicitation or not), opens, prompts,
  cancels, closes, loads, resumes and forks sessions, sets modes and options, lists, signs in,
  sends garbage (not JSON, truncated, mistyped, members dropped, wrong version, odd ids, stray
  responses), and answers the engine's requests (``session/request_permission``,
  ``elicitation/create``, ``fs/read_text_file``) validly, malformed, with an error, or never;
- **Codex** answers the engine's requests (valid results built from the fixtures' real ones,
  malformed results, errors, damaged envelopes, or never; in any order), and sends the
  fixtures' recorded notifications and server requests (ids rewritten to the threads this
  Codex knows, in recorded or any order), server requests on any thread, sub-agents of the
  client's sessions at work (before or after anyone says whose they are),
  ``serverRequest/resolved``, and the events of the turns it started; each intact, truncated,
  mistyped or with a member dropped. What it says is consistent: a ``thread/read`` tells the
  truth of its model (who is whose child), a turn it started is the one it ends;
- **the end**: Codex is lost and the client goes away, in a drawn order; Codex may first
  answer everything it still owes, or the client may go on after Codex is lost.

The properties (defined precisely in the test's docstring): (1) nothing raises out of the
engine; (2) every client request is answered exactly once; (3) every Codex request is
answered at most once, only while Codex is there, and exactly once when nothing excuses
silence; (4) nothing the client is sent names a session it was never shown or has closed.

Why: these are the engine's own rules (``bridge/engine/engine.py``: every request answered
exactly once, bad input answered with a typed error and nothing else changed; the Subagent
Sessions RFD: announce before naming, nothing after close), and a daemon between two
programs meets all of this in practice: a Codex upgrade changing a result's shape, a client
answering late or twice, a line cut short. One uncaught exception takes the bridge down; one
unanswered request hangs an editor, or a Codex turn, for good.

A failure shows the drawn steps and (``note``) every message in and out; ``print_blob`` gives
the ``@reproduce_failure`` line that replays it exactly.

The default run is derandomized so CI is stable; ``--hypothesis-seed=N`` searches further
(that seed's draw). The gap once noted here, a sub-agent's question left held when its
chain broke (a closed root's reopening refused while its sub-agents' reads raced it), is
mended and pinned down in ``tests/test_subagents.py``.

Seeds 2, 4, 20 and 25 once found a client request left unanswered (P2): a defect while
handling a Codex *answer* (e.g. a ``thread/start`` answer with a malformed sandbox type) was
answered only for requests that arrived with that answer. ``Outstanding.result`` in
:mod:`bridge.engine.core.hub` now fails what waits on it; ``tests/test_engine.py`` pins it.
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from hypothesis import core as hypothesis_core
from hypothesis import given, note, settings
from hypothesis import strategies as st

from bridge.engine import Engine, ReadClock, ToClient, ToCodex
from tests.support.codex_corpus import (
    WRONG_VALUES,
    FixtureTraffic,
    Json,
    RequestId,
    at,
    classify,
    corpus,
    decode,
    paths,
    replaced,
    rewrite,
    same_type,
    uuids,
    valid_id,
)

T = TypeVar("T")

CWD = "/work"
MAX_STEPS = 120
#: A thread Codex has stored (``session/load`` finds it) that no session shows yet.
STORED = "0000eeee-0000-7000-8000-000000000001"
#: An id nothing knows.
NOWHERE = "0000ffff-0000-7000-8000-000000000404"
_PREFIX = {"root": "0000aaaa", "kid": "0000bbbb", "foreign": "0000cccc", "turn": "0000dddd"}

CLIENT_METHODS = (
    "session/new",
    "session/new",
    "session/prompt",
    "session/prompt",
    "session/close",
    "session/load",
    "session/resume",
    "session/fork",
    "session/set_mode",
    "session/set_config_option",
    "session/list",
    "authenticate",
)
#: Server requests Codex could send besides the recorded ones: one more approval kind, a
#: legacy approval, and methods this bridge does not know (with and without a thread).
EXTRA_REQUESTS: tuple[dict[str, Json], ...] = (
    {
        "id": 0,
        "method": "item/permissions/requestApproval",
        "params": {
            "threadId": "",
            "turnId": "",
            "itemId": "perm-1",
            "permissions": {"network": {"enabled": True}},
            "reason": "fetch a page",
        },
    },
    {"id": 0, "method": "execCommandApproval", "params": {"conversationId": "", "command": ["ls"]}},
    {"id": 0, "method": "item/tool/call", "params": {"threadId": "", "turnId": "", "tool": "x"}},
    {"id": 0, "method": "account/chatgptAuthTokens/refresh", "params": {"reason": "expired"}},
)
MALFORMED_RESULTS: tuple[Json, ...] = (
    {"thread": {"idd": "x"}},
    {},
    [],
    "x",
    5,
    None,
    {"thread": {"id": 5}},
    {"turn": "x"},
    {"turn": {"id": None}},
    {"data": 5},
)
MALFORMED_ANSWERS: tuple[Json, ...] = (
    {"outcome": 5},
    {"outcome": {"outcome": "selected", "optionId": "not-offered"}},
    {"outcome": {"outcome": "selected"}},
    {"action": 5},
    {"content": 5},
    {},
    [],
    "x",
    None,
)


@dataclass
class Fed:
    """A server request the test fed the engine as Codex."""

    method: str
    #: Its ``params.threadId`` when a non-empty string: the thread it is about.
    thread: str | None
    resolved: bool = False


def mint(kind: str, n: int) -> str:
    return f"{_PREFIX[kind]}-0000-7000-8000-{n:012d}"


def ends(event: dict[str, Json], turn_id: str) -> bool:
    return bool(event["method"] == "turn/completed" and event["params"]["turn"]["id"] == turn_id)


def short(data: bytes | Json, limit: int = 1200) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else repr(data)
    return text if len(text) <= limit else text[:limit] + f"...({len(text)} chars)"


def lineage(thread: str, parents: dict[str, str | None]) -> list[str]:
    """``thread``, its parent in ``parents``, and so on up to its root: 100 at the most, so
    that a cycle (damage may make one) ends."""
    found = [thread]
    while len(found) < 100 and (parent := parents.get(found[-1])) is not None:
        found.append(parent)
    return found


def _answered_once(answers: Counter[Any], rid: Any, sent: bool, rule: str, asker: str) -> None:
    """An answer to ``asker``'s request ``rid`` (``sent``: whether it was ever asked): a
    request's id, answered once (``answers`` counts them)."""
    assert valid_id(rid), f"{rule}: an answer with id {rid!r}, which no request can have"
    answers[rid] += 1
    assert answers[rid] == 1, f"{rule}: {asker}'s request {rid!r} answered twice"
    assert sent, f"{rule}: an answer to request {rid!r}, which {asker} never sent"


class Run:
    """One engine, the two peers the test plays, and what the properties need to know."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.trace: list[str] = []
        self.counter = itertools.count(1)
        self.engine = Engine()
        # Fixtures with sub-agents or questions count thrice: their traffic reaches most.
        names = sorted(corpus().traffic)
        rich = [n for n in names if corpus().traffic[n].parents or corpus().traffic[n].asks]
        self.source: FixtureTraffic = corpus().traffic[
            self.pick(names + rich * 2, "Codex traffic from fixture")
        ]
        self.position = 0
        # -- the client side --
        self.client_requests: dict[RequestId, tuple[str, Json]] = {}
        self.client_invalid = 0
        self.client_invalid_ids: set[RequestId] = set()
        self.client_answers: Counter[RequestId] = Counter()
        self.client_null_errors = 0
        #: The engine's requests to the client that the test has not answered.
        self.asks: dict[RequestId, dict[str, Json]] = {}
        self.subagents = False
        # -- what the client may see (property 4) --
        self.shown: set[str] = set()
        self.closed: set[str] = set()
        self.loading: dict[RequestId, str] = {}
        #: Loads and resumes sent and not refused; the order requests were sent in.
        self.reopening: dict[RequestId, str] = {}
        self.sent_at: dict[RequestId, int] = {}
        self.announced_under: dict[str, str] = {}
        # -- the Codex side --
        self.codex_gone = False
        #: The engine's requests to Codex, by id, and those the test has not answered yet.
        self.asked_codex: dict[RequestId, dict[str, Json]] = {}
        self.outstanding: set[RequestId] = set()
        #: Requests the test decided to answer never (``settle`` still answers them).
        self.never: set[RequestId] = set()
        self.fed: dict[RequestId, Fed] = {}
        self.codex_invalid = 0
        self.codex_invalid_ids: set[RequestId] = set()
        self.codex_answers: Counter[RequestId] = Counter()
        self.codex_null_errors = 0
        # -- the Codex model: its threads, who is whose child, and their turns --
        self.parent: dict[str, str | None] = {}
        #: Roots the engine opened for the client (from its successful answers).
        self.opened: set[str] = set()
        #: Thread → the parent an intact ``thread/read`` answer told the engine.
        self.told: dict[str, str | None] = {}
        self.turn: dict[str, str] = {}
        #: Codex's own events still to come (a started turn's stream, an interrupt's end).
        self.agenda: list[dict[str, Json]] = []
        #: Turns whose ``turn/completed`` Codex sent.
        self.ended: set[str] = set()
        self.binding: dict[str, str] = {}
        self.aliases: dict[str, str] = {}
        self.turn_binding: dict[str, str] = {}
        self.fixture_request_ids: dict[RequestId, RequestId] = {}

    # -- drawing ---------------------------------------------------------------------------

    def pick(self, options: Sequence[T], label: str) -> T:
        return self.data.draw(st.sampled_from(options), label=label)

    def chance(self, label: str, weight: int = 1) -> bool:
        """True once in ``weight + 1`` draws (shrinks to False)."""
        return self.pick([False] * weight + [True], label)

    def fresh(self, kind: str) -> str:
        return mint(kind, next(self.counter))

    def new_id(self) -> RequestId:
        # Integer and string ids alike; unique across everything the test sends.
        n = next(self.counter)
        return n if n % 3 else f"s{n}"

    # -- the engine's effects ---------------------------------------------------------------

    def _apply(self, effects: list[Any]) -> None:
        for effect in effects:
            if isinstance(effect, ReadClock):  # the shell answers at once
                self._apply(self.engine.clock_read(effect.request_id, 1796053601))
                continue
            ok, message = decode(effect.data)
            side = "client" if isinstance(effect, ToClient) else "codex"
            self.trace.append(f"  -> {side}: {short(effect.data)}")
            assert ok and isinstance(message, dict), f"the engine sent {side} non-JSON-RPC"
            if isinstance(effect, ToClient):
                self._to_client(message)
            else:
                assert isinstance(effect, ToCodex)
                self._to_codex(message)

    def _to_client(self, message: dict[str, Json]) -> None:
        method = message.get("method")
        if method is None:
            self._client_answered(message)
            return
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        if "sessionId" in params:
            session = params["sessionId"]
            assert self.visible(session), (
                f"P4: {method} names session {session!r}, which the client "
                f"{'closed' if isinstance(session, str) and session in self.closed else 'was never shown'}"
            )
        update = params.get("update")
        if (
            method == "session/update"
            and isinstance(update, dict)
            and update.get("sessionUpdate") == "subagent_update"
        ):
            assert self.subagents, "P4: subagent_update for a client without `subagents`"
            child = update.get("sessionId")
            if isinstance(child, str) and isinstance(params.get("sessionId"), str):
                self.shown.add(child)
                self.closed.discard(child)
                self.announced_under[child] = params["sessionId"]
        if "id" in message:
            assert valid_id(message["id"]), f"the engine asked the client with id {message['id']!r}"
            self.asks[message["id"]] = message

    def _client_answered(self, message: dict[str, Json]) -> None:
        rid = message.get("id")
        if rid is None:
            self.client_null_errors += 1
            assert "error" in message, "P2: a result with a null id"
            assert self.client_null_errors <= self.client_invalid, (
                "P2: an error with a null id, but every message the client sent without one "
                "was a valid request, to be answered with its own id"
            )
            return
        sent = rid in self.client_requests or rid in self.client_invalid_ids
        _answered_once(self.client_answers, rid, sent, "P2", "the client")
        self.loading.pop(rid, None)
        sent = self.client_requests.get(rid)
        if sent is None or "result" not in message:
            self.reopening.pop(rid, None)
            return
        method, params = sent
        result = message["result"]
        session = params.get("sessionId") if isinstance(params, dict) else None
        if method in ("session/new", "session/fork"):
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                self._opened(result["sessionId"])
        elif method in ("session/load", "session/resume") and isinstance(session, str):
            self._opened(session)
        elif method == "session/close" and isinstance(session, str):
            # A load the client sent after this close asked for the session again: the close
            # answered late does not undo it.
            asked_again = any(
                again == session and self.sent_at[r] > self.sent_at[rid]
                for r, again in self.reopening.items()
            )
            if not asked_again:
                self.closed |= {session, *self._announced_below(session)}

    def _opened(self, session: str) -> None:
        self.shown.add(session)
        self.closed.discard(session)
        self.opened.add(session)
        self.parent.setdefault(session, None)

    def _announced_below(self, session: str) -> set[str]:
        found: set[str] = set()
        frontier = [session]
        while frontier:
            parent = frontier.pop()
            for child, under in self.announced_under.items():
                if under == parent and child not in found:
                    found.add(child)
                    frontier.append(child)
        return found

    def visible(self, session: Json) -> bool:
        if session in self.loading.values():
            return True
        return isinstance(session, str) and session in self.shown and session not in self.closed

    def _to_codex(self, message: dict[str, Json]) -> None:
        assert not self.codex_gone, f"P3: sent Codex {short(message, 200)} after codex_lost"
        if "method" in message:
            if "id" in message:
                assert valid_id(message["id"]), f"the engine asked Codex with id {message['id']!r}"
                self.asked_codex[message["id"]] = message
                self.outstanding.add(message["id"])
            return
        rid = message.get("id")
        if rid is None:
            self.codex_null_errors += 1
            assert self.codex_null_errors <= self.codex_invalid, (
                "P3: an error to Codex with a null id, but Codex sent nothing invalid"
            )
            return
        sent = rid in self.fed or rid in self.codex_invalid_ids
        _answered_once(self.codex_answers, rid, sent, "P3", "Codex")

    # -- calling the engine -----------------------------------------------------------------------

    def _call(self, what: str, call: Callable[[], list[Any]]) -> None:
        self.trace.append(what)
        self._apply(call())

    def client_send(self, data: bytes) -> None:
        kind, rid = classify(data)
        if kind == "request":
            assert valid_id(rid) and rid not in self.client_requests
            _, message = decode(data)
            self.client_requests[rid] = (message["method"], message.get("params"))
            self.sent_at[rid] = len(self.sent_at)
            if message["method"] in ("session/load", "session/resume"):
                params = message.get("params")
                if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
                    self.loading[rid] = self.reopening[rid] = params["sessionId"]
        elif kind == "invalid":
            self.client_invalid += 1
            if rid is not None:
                self.client_invalid_ids.add(rid)
        self._call(f"client: {short(data)}", lambda: self.engine.receive_client(data))

    def codex_send(self, data: bytes) -> None:
        kind, rid = classify(data)
        if kind == "request":
            assert valid_id(rid) and rid not in self.fed
            _, message = decode(data)
            params = message.get("params")
            thread = params.get("threadId") if isinstance(params, dict) else None
            self.fed[rid] = Fed(
                message["method"], thread if isinstance(thread, str) and thread else None
            )
        elif kind == "invalid":
            self.codex_invalid += 1
            if rid is not None:
                self.codex_invalid_ids.add(rid)
        elif kind == "notification":
            _, message = decode(data)
            if message["method"] == "serverRequest/resolved":
                self._resolved(message.get("params"))
        self._call(f"codex: {short(data)}", lambda: self.engine.receive_codex(data))

    def _resolved(self, params: Json) -> None:
        if not isinstance(params, dict):
            return
        rid = params.get("requestId")
        fed = self.fed.get(rid) if valid_id(rid) else None
        if fed is not None and fed.thread is not None and fed.thread == params.get("threadId"):
            fed.resolved = True

    def damaged(self, message: Json, label: str) -> bytes:
        """``message`` as sent: intact mostly; else truncated, a member mistyped or dropped."""
        how = self.pick(["intact"] * 5 + ["truncated", "mistyped", "dropped"], label)
        data = msgspec.json.encode(message)
        if how == "truncated":
            return data[: self.data.draw(st.integers(0, len(data) - 1), label="cut at")]
        places = paths(message)
        if how == "intact" or not places:
            return data
        place = self.pick(places, "member")
        if how == "dropped":
            return msgspec.json.encode(replaced(message, place, None, delete=True))
        current = at(message, place)
        wrong_values = [v for v in WRONG_VALUES if not same_type(v, current)]
        if place == ("id",):
            # Only ids no request can carry: a reused id would make two requests one.
            wrong_values = [v for v in wrong_values if not valid_id(v)]
        wrong = self.pick(wrong_values, "wrong value")
        return msgspec.json.encode(replaced(message, place, wrong))

    # -- the client ------------------------------------------------------------------------------

    def initialize(self) -> None:
        caps: dict[str, Json] = {
            "fs": {"readTextFile": self.chance("fs.readTextFile"), "writeTextFile": False},
            "terminal": False,
        }
        self.subagents = self.chance("declares subagents")
        if self.subagents:
            caps["subagents"] = {}
        elicitation: Json = self.pick([None, {"form": {}}, {"form": {}, "url": {}}], "elicitation")
        if elicitation is not None:
            caps["elicitation"] = elicitation
        if self.chance("declares notices"):
            caps["session"] = {"notices": {}}
        params = {"protocolVersion": 1, "clientCapabilities": caps}
        self.client_send(self._request("initialize", params))

    def _request(self, method: str, params: Json) -> bytes:
        message = {"jsonrpc": "2.0", "id": self.new_id(), "method": method, "params": params}
        return msgspec.json.encode(message)

    def session_id(self) -> str:
        live = self.opened - self.closed
        if live and not self.chance("any session id", 3):
            return self.pick(sorted(live), "session")
        candidates = self.opened | self.shown | set(self.parent) | {NOWHERE}
        return self.pick(sorted(candidates), "session")

    def client_params(self, method: str) -> Json:
        if method == "session/new":
            return self.pick(
                [
                    {"cwd": CWD, "mcpServers": []},
                    {
                        "cwd": CWD,
                        "mcpServers": [{"name": "t", "command": "mcp", "args": [], "env": []}],
                    },
                    {"cwd": "relative", "mcpServers": []},
                ],
                "new",
            )
        if method == "session/prompt":
            text = self.pick(
                ["hi", "/compact", "/review check it", "/shell ls", "/compact x"], "text"
            )
            return {"sessionId": self.session_id(), "prompt": [{"type": "text", "text": text}]}
        if method in ("session/load", "session/resume"):
            target = self.pick(sorted(self.opened | self.closed | {STORED, NOWHERE}), "load")
            return {"sessionId": target, "cwd": CWD, "mcpServers": []}
        if method == "session/fork":
            return {"sessionId": self.session_id(), "cwd": CWD, "mcpServers": []}
        if method == "session/set_mode":
            mode = self.pick(["read-only", "auto", "full-access", "config", "nope"], "mode")
            return {"sessionId": self.session_id(), "modeId": mode}
        if method == "session/set_config_option":
            option, value = self.pick(
                [("model", "gpt-6.1-sol"), ("reasoning_effort", "high"), ("nope", "x")], "option"
            )
            return {"sessionId": self.session_id(), "configId": option, "value": value}
        if method == "session/list":
            return self.pick([{}, {"cwd": CWD}, {"cursor": "not-a-cursor"}], "list")
        if method == "authenticate":
            return {"methodId": self.pick(["chatgpt", "api-key", "nope"], "auth method")}
        return {"sessionId": self.session_id()}

    def client_request(self, method: str | None = None) -> None:
        method = method or self.pick(CLIENT_METHODS, "client request")
        self.client_send(self._request(method, self.client_params(method)))

    def client_open(self) -> None:
        self.client_request("session/new")

    def client_close(self) -> None:
        self.client_request("session/close")

    def client_cancel(self) -> None:
        message = {
            "jsonrpc": "2.0",
            "method": "session/cancel",
            "params": {"sessionId": self.session_id()},
        }
        self.client_send(msgspec.json.encode(message))

    def client_answer(self) -> None:
        rid = self.pick(sorted(self.asks, key=repr), "answer the engine's request")
        ask = self.asks.pop(rid)
        how = self.pick(["valid"] * 3 + ["malformed", "error", "never"], "client answers")
        if how == "never":
            return
        answer: dict[str, Json] = {"jsonrpc": "2.0", "id": rid}
        if how == "error":
            answer["error"] = {"code": -32603, "message": "the editor failed"}
        elif how == "malformed":
            answer["result"] = self.pick(MALFORMED_ANSWERS, "malformed answer")
        else:
            answer["result"] = self.client_result(ask)
        self.client_send(msgspec.json.encode(answer))

    def client_result(self, ask: dict[str, Json]) -> Json:
        method = ask.get("method")
        params = ask.get("params") if isinstance(ask.get("params"), dict) else {}
        assert isinstance(params, dict)
        if method == "session/request_permission":
            options = [
                o.get("optionId") for o in params.get("options") or [] if isinstance(o, dict)
            ]
            outcomes: list[Json] = [{"outcome": "selected", "optionId": o} for o in options]
            return {"outcome": self.pick([*outcomes, {"outcome": "cancelled"}], "outcome")}
        if method == "elicitation/create":
            return self.pick(
                [{"action": "accept", "content": {}}, {"action": "decline"}, {"action": "cancel"}],
                "elicitation answer",
            )
        if method == "fs/read_text_file":
            return {"content": "line one\nline two\n"}
        return {}

    def client_garbage(self) -> None:
        method = self.pick(CLIENT_METHODS, "garbage from")
        rid = self.new_id()
        message: dict[str, Json] = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": method,
            "params": self.client_params(method),
        }
        how = self.pick(
            [
                "damaged",
                "not json",
                "array",
                "version",
                "stray response",
                "no method",
                "bad id",
                "fractional id",
            ],
            "garbage",
        )
        if how == "damaged":
            data = self.damaged(message, "damage")
        elif how == "not json":
            data = b"{this is not json"
        elif how == "array":
            data = msgspec.json.encode([message])
        elif how == "version":
            data = msgspec.json.encode({**message, "jsonrpc": "1.0"})
        elif how == "stray response":
            data = msgspec.json.encode({"jsonrpc": "2.0", "id": f"never-asked-{rid}", "result": {}})
        elif how == "no method":
            data = msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "params": {}})
        elif how == "fractional id":
            # A Number all the same (JSON-RPC: it SHOULD NOT have a fraction): a request.
            data = msgspec.json.encode({**message, "id": next(self.counter) + 0.5})
        else:
            bad = self.pick([None, True, [1], {"x": 1}], "bad id")
            data = msgspec.json.encode({**message, "id": bad})
        self.client_send(data)

    # -- Codex: answering the engine -----------------------------------------------------------------

    def codex_answer(self) -> None:
        choices = sorted(self.outstanding - self.never, key=repr)
        rid = self.pick(choices, "answer the engine's Codex request")
        request = self.asked_codex[rid]
        how = self.pick(
            ["valid"] * 8 + ["malformed", "malformed", "error", "damaged envelope", "never"],
            f"Codex answers {request.get('method')}",
        )
        if how == "never":
            self.never.add(rid)
            return
        if how == "damaged envelope":
            # Not a response Codex's peer can take: the engine still waits for one.
            answer = {"id": rid, "result": self.result_for(request, commit=False)}
            data = self.pick(
                [
                    msgspec.json.encode({"id": rid, "error": "refused"}),
                    msgspec.json.encode(answer)[:-1],
                    msgspec.json.encode({"id": rid}),
                ],
                "damaged",
            )
            self.codex_send(data)
            return
        self.outstanding.discard(rid)
        if how == "error":
            message: Json = {"id": rid, "error": {"code": -32600, "message": "refused by the test"}}
        elif how == "malformed":
            message = {"id": rid, "result": self.malformed(request)}
        else:
            message = {"id": rid, "result": self.result_for(request, commit=True)}
        self.codex_send(msgspec.json.encode(message))

    def malformed(self, request: dict[str, Json]) -> Json:
        if self.chance("a fixed malformed result"):
            return self.pick(MALFORMED_RESULTS, "malformed result")
        result = self.result_for(request, commit=False)
        places = paths(result)
        if not places:
            return self.pick(MALFORMED_RESULTS, "malformed result")
        place = self.pick(places, "mistyped member")
        if self.chance("dropped rather than mistyped"):
            return replaced(result, place, None, delete=True)
        current = at(result, place)
        return replaced(
            result,
            place,
            self.pick([v for v in WRONG_VALUES if not same_type(v, current)], "wrong"),
        )

    def result_for(self, request: dict[str, Json], *, commit: bool) -> Json:
        """A valid result, as Codex 0.169 answers (from the fixtures' real answers).

        ``commit``: the answer will be sent intact, so the Codex model learns what it says
        (its new threads and turns, what a thread read told).
        """
        c = corpus()
        method = request.get("method")
        params = request.get("params") if isinstance(request.get("params"), dict) else {}
        assert isinstance(params, dict)
        thread: str = params["threadId"] if isinstance(params.get("threadId"), str) else NOWHERE
        if method in ("thread/start", "thread/fork", "thread/resume"):
            opened = thread if method == "thread/resume" else self.fresh("root")
            result = copy.deepcopy(c.results[method])
            result["thread"].update(id=opened, sessionId=opened, parentThreadId=None, cwd=CWD)
            if method == "thread/fork":
                result["thread"]["forkedFromId"] = thread
            if commit:
                self.parent.setdefault(opened, None)
            return result
        if method == "thread/read":
            return {"thread": self.stored(thread, bool(params.get("includeTurns")), commit=commit)}
        if method in ("turn/start", "review/start"):
            turn_id = self.fresh("turn")
            turn = {**copy.deepcopy(c.turn), "id": turn_id, "rootTurnId": turn_id}
            if commit:
                self.turn[thread] = turn_id
                self.agenda += self.turn_events(thread, turn)
            result = {"turn": turn}
            if method == "review/start":
                result["reviewThreadId"] = thread
            return result
        if method == "turn/interrupt":
            interrupted = params.get("turnId")
            if commit and isinstance(interrupted, str) and interrupted not in self.ended:
                # The turn ends once: interrupted now, no longer completed later.
                self.agenda = [m for m in self.agenda if not ends(m, interrupted)]
                turn = {**copy.deepcopy(c.turn), "id": interrupted, "status": "interrupted"}
                self.agenda.append(
                    {"method": "turn/completed", "params": {"threadId": thread, "turn": turn}}
                )
            return {}
        if method == "account/login/start":
            if params.get("type") == "chatgpt":
                login = self.fresh("turn").replace(_PREFIX["turn"], "login")
                return {"type": "chatgpt", "loginId": login, "authUrl": f"https://auth/{login}"}
            return {"type": "apiKey"}
        return copy.deepcopy(c.results.get(str(method), {}))

    def stored(self, thread: str, include_turns: bool, *, commit: bool) -> dict[str, Json]:
        """What ``thread/read`` says of ``thread``: the truth of this Codex's model."""
        c = corpus()
        parent = self.parent.get(thread)
        if parent is not None:
            stored = copy.deepcopy(c.child_thread)
            stored.update(agentNickname=f"Agent {thread[-3:]}", agentRole="worker")
        else:
            stored = copy.deepcopy(c.stored_thread)
            stored.update(agentNickname=None, agentRole=None)
        stored.update(id=thread, sessionId=thread, parentThreadId=parent, cwd=CWD, turns=[])
        if include_turns and parent is None:
            stored["turns"] = copy.deepcopy(c.stored_thread["turns"])
            if self.chance("its history spawned a sub-agent"):
                kid = self.kid_of(thread) if commit else self.fresh("kid")
                item = copy.deepcopy(c.spawn_item)
                item.update(
                    senderThreadId=thread,
                    receiverThreadIds=[kid],
                    agentsStates={kid: {"status": "completed", "message": "done"}},
                )
                turn = {**copy.deepcopy(c.turn), "id": self.fresh("turn"), "status": "completed"}
                stored["turns"].append({**turn, "items": [item]})
        if commit:
            self.told[thread] = parent
        return stored

    def turn_events(self, thread: str, turn: dict[str, Json]) -> list[dict[str, Json]]:
        item = f"msg-{turn['id'][-4:]}"
        done = {**turn, "status": "completed"}
        return [
            {"method": "turn/started", "params": {"threadId": thread, "turn": turn}},
            {
                "method": "item/agentMessage/delta",
                "params": {"threadId": thread, "turnId": turn["id"], "itemId": item, "delta": "Hi"},
            },
            {"method": "turn/completed", "params": {"threadId": thread, "turn": done}},
        ]

    # -- Codex: its own traffic -------------------------------------------------------------------------

    def kid_of(self, parent: str) -> str:
        kid = self.fresh("kid")
        self.parent[kid] = parent
        return kid

    def bind(self, fixture_thread: str) -> str:
        """The thread of ours a fixture's thread stands for (fixed once a root is open)."""
        if fixture_thread in self.binding:
            return self.binding[fixture_thread]
        parent = self.source.parents.get(fixture_thread)
        if parent is not None:
            ours = self.bind(parent)
            if parent not in self.binding:  # its family stands in for another client's
                return self._alias(fixture_thread, ours)
            self.binding[fixture_thread] = self.kid_of(ours)
            return self.binding[fixture_thread]
        if self.opened:
            self.binding[fixture_thread] = self.pick(sorted(self.opened), "fixture root is")
            return self.binding[fixture_thread]
        # No session open yet: the traffic is another client's thread.
        return self._alias(fixture_thread, None)

    def _alias(self, fixture_thread: str, parent: str | None) -> str:
        if fixture_thread not in self.aliases:
            alias = self.aliases[fixture_thread] = self.fresh("foreign")
            self.parent[alias] = parent
        return self.aliases[fixture_thread]

    def bind_turn(self, fixture_turn: str) -> str:
        if fixture_turn not in self.turn_binding:
            fixture_thread = self.source.turn_thread.get(fixture_turn)
            thread = self.bind(fixture_thread) if fixture_thread else None
            current = self.turn.get(thread) if thread else None
            taken = set(self.turn_binding.values())
            self.turn_binding[fixture_turn] = (
                current if current and current not in taken else self.fresh("turn")
            )
        return self.turn_binding[fixture_turn]

    def codex_fixture(self) -> None:
        messages = self.source.messages
        if self.position < len(messages) and not self.chance("out of order", 3):
            index = self.position
            self.position += 1
        else:
            index = self.data.draw(st.integers(0, len(messages) - 1), label="fixture message")
        original = messages[index]
        ids: dict[bytes, str] = {}
        for found in sorted(uuids(original)):
            text = found.decode()
            if text in self.source.threads or text in self.source.roots:
                ids[found] = self.bind(text)
            elif text in self.source.turn_thread:
                ids[found] = self.bind_turn(text)
        message = rewrite(original, ids)
        if "id" in message:
            rid = self.new_id()
            self.fixture_request_ids[message["id"]] = rid
            message["id"] = rid
        params = message.get("params")
        if message["method"] == "serverRequest/resolved" and isinstance(params, dict):
            fixture_id = params.get("requestId")
            ours = self.fixture_request_ids.get(fixture_id) if valid_id(fixture_id) else None
            params["requestId"] = -1 if ours is None else ours
        self.codex_send(self.damaged(message, "fixture message damage"))

    def codex_request(self, thread: str | None = None) -> None:
        templates = [*corpus().requests, *EXTRA_REQUESTS]
        labels = [f"{n}: {t['method']}" for n, t in enumerate(templates)]
        template = templates[int(self.pick(labels, "server request").split(":")[0])]
        if thread is None:
            thread = self.pick(sorted(set(self.parent) | {""}), "about thread")
            if thread and self.chance("a new sub-agent of it", 3):
                thread = self.kid_of(thread)
        message = copy.deepcopy(template)
        message["id"] = self.new_id()
        params = message.get("params")
        if isinstance(params, dict) and "threadId" in params:
            params["threadId"] = thread
            if "turnId" in params:
                params["turnId"] = self.turn.get(thread) or self.fresh("turn")
        self.codex_send(self.damaged(message, "server request damage"))

    def codex_child(self) -> None:
        """A sub-agent of one of the client's sessions at work (Codex announces none: its
        parent's spawn item, its own events and its questions come in any order)."""
        ours = {t for t in self.parent if self.ours_in_model(t)}
        parent = self.pick(sorted(ours), "sub-agent of")
        kids = sorted(t for t, p in self.parent.items() if p == parent)
        kid = self.pick(kids, "sub-agent") if kids and self.chance("an existing one") else None
        kid = kid or self.kid_of(parent)
        what = self.pick(["turn started", "status", "spawn item", "question"], "the sub-agent's")
        if what == "question":
            self.codex_request(kid)
            return
        c = corpus()
        if what == "turn started":
            root = self.root_in_model(kid)
            turn_id = self.fresh("turn")
            turn = {**copy.deepcopy(c.turn), "id": turn_id, "rootTurnId": self.turn.get(root)}
            self.turn[kid] = turn_id
            self.agenda.append(
                {
                    "method": "turn/completed",
                    "params": {"threadId": kid, "turn": {**turn, "status": "completed"}},
                }
            )
            message = {"method": "turn/started", "params": {"threadId": kid, "turn": turn}}
        elif what == "status":
            status = {"type": "active", "activeFlags": []}
            message = {
                "method": "thread/status/changed",
                "params": {"threadId": kid, "status": status},
            }
        else:
            item = copy.deepcopy(c.spawn_item)
            item.update(
                senderThreadId=parent,
                receiverThreadIds=[kid],
                agentsStates={kid: {"status": "pendingInit", "message": None}},
            )
            params = {"threadId": parent, "turnId": self.turn.get(parent) or self.fresh("turn")}
            message = {"method": "item/completed", "params": {**params, "item": item}}
        self.codex_send(self.damaged(message, "sub-agent event damage"))

    def ours_in_model(self, thread: str) -> bool:
        """This Codex's truth (what it would say if asked), unlike :meth:`ours`."""
        return self.root_in_model(thread) in self.opened

    def root_in_model(self, thread: str) -> str:
        return lineage(thread, self.parent)[-1]

    def codex_resolve(self) -> None:
        open_requests = [
            rid for rid, fed in self.fed.items() if fed.thread and not self.codex_answers[rid]
        ]
        rid = self.pick(sorted(open_requests, key=repr), "Codex stops waiting for")
        params = {"threadId": self.fed[rid].thread, "requestId": rid}
        message = {"method": "serverRequest/resolved", "params": params}
        self.codex_send(self.damaged(message, "resolved damage"))

    def codex_agenda(self) -> None:
        index = (
            0
            if not self.chance("out of order")
            else self.data.draw(st.integers(0, len(self.agenda) - 1), label="agenda item")
        )
        event = self.agenda.pop(index)
        if event["method"] == "turn/completed":
            self.ended.add(event["params"]["turn"]["id"])
        self.codex_send(self.damaged(event, "event damage"))

    # -- the run ---------------------------------------------------------------------------------------

    def step(self) -> None:
        # Named steps (not bound methods), so a failing example reads as a story. Weighted
        # toward what makes the rest reachable: open sessions, answered requests, sub-agents.
        steps = ["client request", "client request", "client garbage", "client cancel"]
        steps += ["client close"] if self.opened else ["client open"] * 2
        if self.asks:
            steps += ["client answer"] * 3
        if not self.codex_gone:
            steps += ["codex fixture"] * 3 + ["codex request"]
            if self.outstanding - self.never:
                steps += ["codex answer"] * 6
            if self.agenda:
                steps += ["codex agenda"] * 2
            if self.opened:
                steps += ["codex child"] * 2
            if any(fed.thread and not self.codex_answers[rid] for rid, fed in self.fed.items()):
                steps.append("codex resolve")
        getattr(self, self.pick(steps, "step").replace(" ", "_"))()

    def settle(self) -> None:
        """Codex answers everything the engine still waits for, until it asks nothing more."""
        for _ in range(100):
            waiting = sorted(self.outstanding, key=repr)
            if not waiting:
                return
            for rid in waiting:
                self.outstanding.discard(rid)
                self.never.discard(rid)
                answer = {"id": rid, "result": self.result_for(self.asked_codex[rid], commit=True)}
                self.codex_send(msgspec.json.encode(answer))
        raise AssertionError("P3 (settle): the engine keeps asking Codex, 100 rounds on")

    def lose_codex(self) -> None:
        self.codex_gone = True
        self._call("codex_lost", lambda: self.engine.codex_lost("test over"))

    def lose_client(self) -> None:
        self._call("client_lost", self.engine.client_lost)

    def ours(self, thread: str) -> bool:
        return any(t in self.opened for t in lineage(thread, self.told))

    def run(self) -> None:
        self._call("start", self.engine.start)
        self.initialize()
        # A stop draw per step (not a count drawn first) lets hypothesis delete single steps.
        for _ in range(MAX_STEPS):
            if self.data.draw(st.integers(0, 40), label="stop (0) or go on") == 0:
                break
            self.step()
        ending = self.pick(
            ["settle, client first", "client first", "codex first", "codex first, client goes on"],
            "ending",
        )
        if ending == "settle, client first":
            self.settle()
        if ending.endswith("client first"):
            self.lose_client()
            self.lose_codex()
        else:
            self.lose_codex()
            if ending.endswith("goes on"):
                for _ in range(8):
                    if self.data.draw(st.integers(0, 3), label="stop (0) or go on") == 0:
                        break
                    # Late answers, too, to what the engine asked before Codex went.
                    steps = ["client request", "client garbage", "client cancel"]
                    steps += ["client answer"] if self.asks else []
                    getattr(self, self.pick(steps, "step").replace(" ", "_"))()
            self.lose_client()
        self.check_end(strict_codex=ending == "settle, client first")

    def check_end(self, *, strict_codex: bool) -> None:
        unanswered = sorted(
            (rid for rid in self.client_requests if self.client_answers[rid] != 1), key=repr
        )
        assert not unanswered, "P2: client requests never answered: " + ", ".join(
            f"{rid!r} ({self.client_requests[rid][0]})" for rid in unanswered
        )
        if not strict_codex:
            return
        silent = sorted(
            (
                rid
                for rid, fed in self.fed.items()
                if not self.codex_answers[rid]
                and not fed.resolved
                and (fed.thread is None or self.ours(fed.thread))
            ),
            key=repr,
        )
        assert not silent, "P3: Codex requests never answered while Codex was there: " + ", ".join(
            f"{rid!r} ({self.fed[rid].method} on {self.fed[rid].thread})" for rid in silent
        )


@settings(
    max_examples=300,
    deadline=None,
    print_blob=True,
    # One bug at a time: shrinking each of many distinct failures takes hypothesis minutes.
    report_multiple_bugs=False,
    # The same 300 examples on every run: CI must not pass or fail by the draw. Search
    # further by hand with --hypothesis-seed=N, which derandomize would ignore (hypothesis
    # prefers it to a seed): a seed given, that seed's draw, and no example database
    # replaying another run's failure first.
    derandomize=hypothesis_core.global_force_seed is None,
    database=None,
)
@given(data=st.data())
def test_the_engine_stays_sound_whatever_either_side_sends(data: st.DataObject) -> None:
    """The properties, checked on every message the engine emits, in order, and at the end.

    1. **Nothing raises** out of ``start``, ``receive_client``, ``receive_codex``,
       ``codex_lost`` or ``client_lost``.
    2. **Every client request is answered exactly once.** A *request* is a JSON object with a
       string ``method``, a string or number ``id``, ``jsonrpc`` absent or ``"2.0"``, and no
       ``result`` or ``error``. Each gets exactly one response or error with its id, by the
       end: after ``codex_lost`` and ``client_lost`` nothing may still be pending. Anything
       else the client sends is not valid JSON-RPC and gets at most one error reply (a null-id
       error counts against the invalid messages sent); nothing answers an id never sent.
    3. **Every Codex request is answered at most once, only while Codex is connected, and
       exactly once when nothing excuses silence.** Codex's requests are the server requests
       the test feeds (same definition). The engine never answers one twice, never answers an
       id Codex did not send, and sends Codex nothing after ``codex_lost``: an answer then
       reaches no one, a request then would wait forever.

       *Exactly once* is required where the engine can have no reason to stay silent: in
       runs where Codex answered everything the engine asked it (``settle``) and the client
       went away before Codex did, so nothing can still wait on the user or on Codex. Then
       every request must have been answered before ``codex_lost``, except

       - one Codex withdrew itself (an intact ``serverRequest/resolved`` naming it and its
         thread): Codex no longer waits for an answer;
       - one about a thread that is not this connection's. *Ours* is a root session the
         engine opened for this client (a successful ``session/new``, ``load``, ``resume`` or
         ``fork``; closed later or not), or a thread that Codex, in an intact ``thread/read``
         answer, said is the child of one of ours. Any other thread may be another client's
         on the same app-server, and that client answers its questions: silence is right. A
         closed session and its sub-agents stay ours: closing cancels their work, so their
         questions must be declined, not left hanging.

       In the other runs a question may still wait on the user, or on a thread read Codex
       never answered, when Codex goes; after ``codex_lost`` nothing can answer it, so its
       silence is legitimate and only *at most once* holds.
    4. **Nothing names a session the client cannot see.** No ``session/update``, and no
       request to the client naming a ``sessionId`` (``session/request_permission``,
       ``elicitation/create``, ``fs/read_text_file``), names a session that was never shown or
       is closed. *Shown*: the ``sessionId`` of a successful ``session/new`` or
       ``session/fork`` result; a ``session/load`` or ``session/resume`` request's
       ``sessionId`` from the moment the client sends it (a load replays history before it
       answers) and, after success, for good; a child announced by a ``subagent_update`` on
       a shown session's stream. *Closed*: a session whose ``session/close`` succeeded, and
       every sub-agent announced under it, from that response on (until a later successful
       load shows it again; a close answered only after a load of the session that the client
       sent later closes nothing: the client asked for it again). And no ``subagent_update``
       reaches a client that did not declare ``subagents``.
    """
    run = Run(data)
    # The engine logs every bad message it gets; captured by pytest, thousands of records
    # per run cost more than the engine does. What it logs is not under test here.
    logger = logging.getLogger("bridge")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        run.run()
    finally:
        logger.setLevel(level)
        note("\n".join(run.trace))


def test_the_model_finds_a_threads_root_and_ends_a_cycle_damage_made() -> None:
    """The properties judge a thread by its root (``ours``, ``root_in_model``): the walk up
    ends at a thread with no parent, and on a cycle after 100 steps instead of never."""
    parents: dict[str, str | None] = {"c": "b", "b": "a", "a": None}
    assert lineage("c", parents) == ["c", "b", "a"]
    assert lineage("a", parents) == ["a"]
    assert lineage("unknown", parents) == ["unknown"]
    cycle: dict[str, str | None] = {"x": "y", "y": "x"}
    walked = lineage("x", cycle)
    assert len(walked) == 100 and walked[:3] == ["x", "y", "x"]

"""Drive the pure engine with dicts instead of bytes (unit tests only)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar, overload

import msgspec

from bridge.engine import (
    Engine,
    MachineCall,
    MachineChosen,
    MachineReleased,
    MachineWanted,
    ReadClock,
    ToClient,
    ToCodex,
)
from bridge.jsonrpc.peer import ErrorObject
from bridge.recording import TranscriptChecker

from .acp_schema import ConversationValidator

S = TypeVar("S", bound=msgspec.Struct)


class Harness:
    """An engine plus what it has sent to each side, decoded."""

    def __init__(self, *, ready: bool = True, catalog: Any = None, **engine_options: Any) -> None:
        """``ready``: do Codex's handshake; the engine then asks for the model catalog,
        answered with ``catalog`` (no models unless given; ``False`` leaves it unanswered)."""
        self.engine = Engine(**engine_options)
        self.to_client: list[dict[str, Any]] = []
        self.to_codex: list[dict[str, Any]] = []
        #: The Codex requests the engine asked the shell to read the clock for.
        self.clock_reads: list[Any] = []
        #: The machines the engine asked the shell to reach, in order.
        self.machines_wanted: list[str] = []
        #: The picks the engine asked the shell to store: (thread, machine).
        self.machines_chosen: list[tuple[str, str]] = []
        #: The calls the engine asked the shell to carry to a machine's exec-server.
        self.machine_calls: list[MachineCall] = []
        #: The folders each machine was wanted with (a session's own place), by name.
        self.machine_folders: dict[str, tuple[str, ...]] = {}
        #: The sessions' own places the engine asked the shell to remove, in order.
        self.machines_released: list[str] = []
        self._next_client_id = 100
        self._collect(self.engine.start())
        if ready:
            init = self.codex_request("initialize")
            self.codex_reply(init["id"], {"userAgent": "codex/0.169.0"})
            for added in [m for m in self.to_codex if m.get("method") == "environment/add"]:
                self.codex_reply(added["id"], {})
            if catalog is not False:
                listed = self.codex_request("model/list")
                self.codex_reply(listed["id"], catalog if catalog is not None else {"data": []})

    def _collect(self, effects: list[Any]) -> list[dict[str, Any]]:
        out = []
        for effect in effects:
            if isinstance(effect, ReadClock):
                self.clock_reads.append(effect.request_id)
                continue
            if isinstance(effect, MachineWanted):
                self.machines_wanted.append(effect.name)
                self.machine_folders[effect.name] = effect.folders
                continue
            if isinstance(effect, MachineReleased):
                self.machines_released.append(effect.name)
                continue
            if isinstance(effect, MachineChosen):
                self.machines_chosen.append((effect.thread_id, effect.machine))
                continue
            if isinstance(effect, MachineCall):
                self.machine_calls.append(effect)
                continue
            message = msgspec.json.decode(effect.data)
            if isinstance(effect, ToClient):
                self.to_client.append(message)
            else:
                assert isinstance(effect, ToCodex)
                self.to_codex.append(message)
            out.append(message)
        return out

    # -- a machine's exec-server --------------------------------------------------------

    def machine_answer(
        self, call: MachineCall, result: Any = None, *, error: tuple[int, str] | None = None
    ) -> list[dict[str, Any]]:
        """Answer the engine's ``call`` with ``result``, or ``error`` (code, message)."""
        if error is not None:
            return self._collect(self.engine.machine_answered(call.key, None, *error))
        return self._collect(self.engine.machine_answered(call.key, msgspec.json.encode(result)))

    # -- the client side ---------------------------------------------------------------

    def client_raw(self, data: bytes) -> list[dict[str, Any]]:
        return self._collect(self.engine.receive_client(data))

    def client_request(self, method: str, params: Any) -> int:
        rid = self._next_client_id
        self._next_client_id += 1
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.client_raw(msgspec.json.encode(message))
        return rid

    def client_notify(self, method: str, params: Any) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        self.client_raw(msgspec.json.encode(message))

    def client_response(self, rid: int) -> dict[str, Any] | None:
        """The answer the client got for request ``rid`` (at most one allowed)."""
        answers = [m for m in self.to_client if m.get("id") == rid and "method" not in m]
        assert len(answers) <= 1, f"request {rid} answered {len(answers)} times: {answers}"
        return answers[0] if answers else None

    @overload
    def result(self, rid: int) -> dict[str, Any]: ...
    @overload
    def result(self, rid: int, kind: type[S]) -> S: ...
    def result(self, rid: int, kind: type[S] | None = None) -> dict[str, Any] | S:
        """The result the client got for request ``rid``, which must have been answered
        with one (not an error): as sent, or decoded as ``kind``."""
        response = self.client_response(rid)
        assert response is not None, f"request {rid} is unanswered"
        assert "error" not in response, f"request {rid} failed: {response}"
        result: dict[str, Any] = response["result"]
        return result if kind is None else msgspec.convert(result, kind)

    def error(self, rid: int) -> ErrorObject:
        """The error the client got for request ``rid``, which must have failed."""
        response = self.client_response(rid)
        assert response is not None, f"request {rid} is unanswered"
        assert "result" not in response, f"request {rid} succeeded: {response}"
        return msgspec.convert(response["error"], ErrorObject)

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.to_client
            if m.get("method") == "session/update"
            and (session_id is None or m["params"]["sessionId"] == session_id)
        ]

    # -- the codex side ------------------------------------------------------------------

    def codex_request(self, method: str) -> dict[str, Any]:
        """The last request the engine sent Codex with this method."""
        found = [m for m in self.to_codex if m.get("method") == method and "id" in m]
        assert found, (
            f"engine sent Codex no {method} (sent: {[m.get('method') for m in self.to_codex]})"
        )
        return found[-1]

    def codex_reply(self, rid: int, result: Any) -> list[dict[str, Any]]:
        return self._collect(
            self.engine.receive_codex(msgspec.json.encode({"id": rid, "result": result}))
        )

    def codex_error(self, rid: int, message: str, code: int = -32600) -> list[dict[str, Any]]:
        payload = {"id": rid, "error": {"code": code, "message": message}}
        return self._collect(self.engine.receive_codex(msgspec.json.encode(payload)))

    def thread_started(self, cwd: str, model: str, sandbox: Any) -> int:
        """``session/new`` in ``cwd``, Codex's ``thread/start`` answered: thread ``thread-1``,
        on ``model``, in ``sandbox``; the request's id."""
        rid = self.client_request("session/new", {"cwd": cwd, "mcpServers": []})
        started = {"id": "thread-1", "cwd": cwd}
        self.codex_reply(
            self.codex_request("thread/start")["id"],
            {"thread": started, "model": model, "approvalPolicy": "on-request", "sandbox": sandbox},
        )
        return rid

    def turn_notify(self, method: str, thread: str, turn: str = "turn-1", **params: Any) -> None:
        """Codex's notification ``method`` about turn ``turn`` of ``thread``."""
        self.codex_notify(method, {"threadId": thread, "turnId": turn, **params})

    def machine_changed(self, name: str, state: str, reason: str = "") -> list[dict[str, Any]]:
        return self._collect(self.engine.machine_changed(name, state, reason))

    def codex_notify(self, method: str, params: Any) -> list[dict[str, Any]]:
        return self._collect(
            self.engine.receive_codex(msgspec.json.encode({"method": method, "params": params}))
        )

    # -- common sequences ---------------------------------------------------------------------

    def new_session(self, thread_id: str = "thread-1", cwd: str = "/work") -> str:
        rid = self.client_request("session/new", {"cwd": cwd, "mcpServers": []})
        start = self.codex_request("thread/start")
        self.codex_reply(start["id"], {"thread": {"id": thread_id, "cwd": cwd}, "model": "mock"})
        response = self.client_response(rid)
        assert response is not None and response["result"] == {"sessionId": thread_id}
        return thread_id

    def start_prompt(self, session_id: str, text: str = "hi", turn_id: str = "turn-1") -> int:
        rid = self.client_request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )
        start = self.codex_request("turn/start")
        self.codex_reply(
            start["id"], {"turn": {"id": turn_id, "status": "inProgress", "items": []}}
        )
        return rid

    def complete_turn(
        self, thread_id: str, turn_id: str = "turn-1", status: str = "completed", error: Any = None
    ) -> None:
        turn: dict[str, Any] = {"id": turn_id, "status": status, "items": []}
        if error is not None:
            turn["error"] = error
        self.codex_notify("turn/completed", {"threadId": thread_id, "turn": turn})


class Windows:
    """Two client connections on one shared Codex (two windows, two ``serve``): two engines
    fed the same Codex events, each answering its own Codex requests. ``a`` opens the session
    (``session/new``); ``b`` opens it again (``session/load`` or ``session/resume``)."""

    def __init__(self, thread_id: str = "thread-1", cwd: str = "/work", **options: Any) -> None:
        self.thread_id = thread_id
        self.cwd = cwd
        # A shared Codex: each window knows another client may answer what Codex asks.
        self.a = Harness(**{"codex_shared": True, **options.get("a", {})})
        self.b = Harness(**{"codex_shared": True, **options.get("b", {})})

    def both(self) -> tuple[Harness, Harness]:
        return self.a, self.b

    def notify(self, method: str, params: Any) -> None:
        """A Codex notification of the thread: every subscribed connection gets it."""
        for window in self.both():
            window.codex_notify(method, params)

    def open(
        self,
        method: str = "session/load",
        *,
        status: str = "idle",
        turns: list[dict[str, Any]] | None = None,
        window: Harness | None = None,
    ) -> int:
        """``window`` (``b``) opens the session with ``method``; Codex says the thread is
        ``status`` with ``turns`` stored. Every Codex request of the open is answered."""
        h = window or self.b
        before = len(h.to_codex)
        rid = h.client_request(
            method, {"sessionId": self.thread_id, "cwd": self.cwd, "mcpServers": []}
        )
        thread = {
            "id": self.thread_id,
            "cwd": self.cwd,
            "preview": "",
            "status": {"type": status},
            "turns": turns or [],
        }

        def reply(m: dict[str, Any]) -> Any:
            if m["method"] == "thread/read":
                return {"thread": thread}
            if m["method"] == "thread/resume":
                return {"thread": {**thread, "turns": []}, "model": "mock"}
            if m["method"] == "thread/backgroundTerminals/list":
                return {"data": [], "nextCursor": None}
            return {}

        answer_codex_until_answered(h, rid, reply, since=before, what=method)
        return rid


def skills_list(*skills: tuple[str, str, bool, str]) -> dict[str, Any]:
    """Codex's answer to ``skills/list`` for ``/work``: each skill as (name, description,
    enabled, path)."""
    return {
        "data": [
            {
                "cwd": "/work",
                "errors": [],
                "skills": [
                    {"name": name, "description": about, "enabled": enabled, "path": path}
                    for name, about, enabled, path in skills
                ],
            }
        ]
    }


def answer_codex_until_answered(
    h: Harness,
    rid: int,
    reply: Callable[[dict[str, Any]], Any],
    *,
    asks: Collection[str] | None = None,
    since: int = 0,
    what: str = "the load",
) -> None:
    """Answer each request ``h`` sent Codex (from its ``since``-th message on, and only those
    of the methods ``asks`` names when given) with ``reply(request)``, until the client has
    the response to its request ``rid``."""
    answered: set[Any] = set()
    for _ in range(100):  # each round answers at least one request: the engine asks finitely
        if h.client_response(rid) is not None:
            return
        waiting = [
            m
            for m in h.to_codex[since:]
            if "id" in m
            and "method" in m
            and (asks is None or m["method"] in asks)
            and m["id"] not in answered
        ]
        assert waiting, f"{what} waits on nothing (sent Codex: {h.to_codex})"
        for m in waiting:
            answered.add(m["id"])
            h.codex_reply(m["id"], reply(m))
    raise AssertionError(f"{what} never answered")


def request_log(h: Harness) -> tuple[list[tuple[int, dict[str, Any]]], Callable[[str, Any], int]]:
    """A log of client requests, and a function that sends one to ``h`` and logs it with how
    many messages the client had received before it (where it stands in the conversation)."""
    requests: list[tuple[int, dict[str, Any]]] = []

    def request(method: str, params: Any) -> int:
        at = len(h.to_client)
        rid = h.client_request(method, params)
        requests.append((at, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        return rid

    return requests, request


def check_interleaved(
    agent_sent: list[dict[str, Any]],
    client_sent: list[tuple[int, dict[str, Any]]],
    *,
    version: int = 1,
    unstable: bool,
    subagents: bool,
) -> None:
    """A whole conversation against the ACP schema (``version``, ``unstable``) and the
    transcript rules: what the agent sent, with the client's messages in their places (each
    after the number of agent messages it came after). ``client_sent`` is consumed."""
    validator = ConversationValidator(version=version, unstable=unstable)
    checker = TranscriptChecker(subagents=subagents)
    for line, message in enumerate([*agent_sent, None], start=1):
        while client_sent and client_sent[0][0] < line:
            _at, sent = client_sent.pop(0)
            validator.client_sent(sent)
            checker.client(sent, line - 1)
        if message is not None:
            validator.agent_sent(message)
            checker.agent(message, line)

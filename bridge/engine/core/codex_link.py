"""The hub's Codex side: what goes to Codex and comes back, and Codex's connection.

:class:`CodexLink` is ``hub.codex`` (:mod:`.hub`): requests to Codex, each answered once
(:meth:`CodexLink.request`; :meth:`CodexLink.ask` for one whose answer changes a thread's
record), Codex's requests answered, the clock and machines' exec-servers asked for the
features, and Codex's connection's state (:class:`~.codex_side.CodexSide`, moved by
:mod:`.connection` alone). Its effects go out in one order with the client's: it writes
to the hub's list of effects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgspec
from msgspec import Raw

from ...codex import types as codex_types
from ...jsonrpc import ErrorCode, Peer, RequestId
from ...jsonrpc.peer import ErrorObject
from . import effects
from .answers import OnError, OnResult, Outstanding, answering, decoder
from .codex_asks import CodexAsk, InterruptTurn
from .codex_side import CodexSide, CodexState
from .record_parts import HeldMessage, Turn
from .threads import ThreadRecord, withdraw
from .turns import interrupting

log = logging.getLogger(__name__)

E = TypeVar("E", bound=CodexAsk)


@dataclass(slots=True, eq=False)
class _Asked:
    """What :meth:`CodexLink.ask` waits with: the record, its entry, the feature's two methods."""

    method: str
    record: ThreadRecord
    entry: Any
    answered: Callable[[ThreadRecord, Any, Any], None]
    failed: Callable[[ThreadRecord, Any, ErrorObject], None]
    #: ``answered`` runs: a defect of it comes back as an error, still this entry's.
    answering: bool = False

    def result(self, value: Any) -> None:
        if not withdraw(self.record, self.entry):
            self._stale()
            return
        self.answering = True
        self.answered(self.record, self.entry, value)

    def error(self, error: ErrorObject) -> None:
        if self.answering or withdraw(self.record, self.entry):
            self.answering = False
            self.failed(self.record, self.entry, error)
        else:
            self._stale()

    def _stale(self) -> None:
        log.debug(
            "thread %s: Codex's answer to %s comes after its %s was withdrawn; dropped",
            self.record.id,
            self.method,
            type(self.entry).__name__,
        )


class Refeeder(Protocol):
    """Codex's router, as the sub-agent gate hands a held message back to it."""

    def refeed(self, message: HeldMessage) -> None: ...


class CodexLink:
    """The hub's Codex side (see the module docstring)."""

    def __init__(self, out: list[effects.Effect]) -> None:
        #: The JSON-RPC peer (a new one for each connection to Codex: :meth:`reset`).
        self.peer = Peer[Outstanding](jsonrpc_member=False)
        #: Codex's side of the connection: moved by core/connection.py alone.
        self.side = CodexSide()
        #: Codex's requests received and not answered yet.
        self.open_requests: set[RequestId] = set()
        #: Codex methods Codex answered it does not know (experimental ones come and go).
        self.unknown: set[str] = set()
        #: Codex's router (:mod:`.codex_routing`), which registers itself: a message the
        #: sub-agent gate held goes back through it (:meth:`refeed`).
        self.router: Refeeder | None = None
        #: Clock reads the features asked for (:meth:`ask_clock`), by their key.
        self._clock_waiters: dict[RequestId, Callable[[int], None]] = {}
        self._clock_asked = 0
        #: Calls to a machine's exec-server (:meth:`machine_request`), by their key.
        self._machine_waiters: dict[str, Outstanding] = {}
        self._machine_asked = 0
        self._out = out

    def requests_void(self) -> None:
        """Codex is gone: nobody is left to answer the requests it made."""
        self.open_requests.clear()

    def reset(self) -> None:
        """A new connection to Codex (it was restarted, or reconnected): a fresh peer,
        whose request ids start again from 0, and nothing owed to the old one."""
        self.peer = Peer[Outstanding](jsonrpc_member=False)
        self.open_requests.clear()

    @property
    def ready(self) -> bool:
        """Codex finished its handshake (READY)."""
        return self.side.state is CodexState.READY

    @property
    def lost_reason(self) -> str | None:
        """Why Codex is away (RECOVERING, LOST); ``None`` while it is there or coming."""
        return self.side.reason

    def request(
        self, method: str, params: Any, result: Any, on_result: OnResult, on_error: OnError
    ) -> None:
        """Ask Codex; ``on_result`` gets the answer decoded as ``result`` (a type), or
        ``None`` as ``result`` passes the raw answer on, unread. What :meth:`ask` and
        an exchange's steps (:mod:`bridge.engine.core.exchanges`) send through."""
        if self.lost_reason is not None:
            on_error(ErrorObject(ErrorCode.INTERNAL_ERROR, self.lost_reason))
            return
        waiting = Outstanding(
            method, None if result is None else decoder(result), on_result, on_error
        )
        _rid, data = self.peer.request(method, params, waiting)
        self._out.append(effects.ToCodex(data))

    def ask(
        self,
        record: ThreadRecord,
        entry: E,
        method: str,
        params: Any,
        result: Any,
        answered: Callable[[ThreadRecord, E, Any], None],
        failed: Callable[[ThreadRecord, E, ErrorObject], None],
    ) -> None:
        """Ask Codex for ``record``, whose ``entry`` says what is asked (see
        :data:`~bridge.engine.core.threads.CodexAsk`): the entry is on the record
        (``record.codex_asks``) until Codex answers. Then it is taken off, and
        ``answered(record, entry, value)`` (decoded as :meth:`codex_request` does) or
        ``failed(record, entry, error)`` is called: only if the record still held it. An
        entry withdrawn meanwhile (its turn ended, its record forgotten) makes the answer
        stale: logged, and nothing changes. ``answered`` and ``failed`` are methods of the
        feature, not closures over the record."""
        if self.lost_reason is not None:
            failed(record, entry, ErrorObject(ErrorCode.INTERNAL_ERROR, self.lost_reason))
            return
        record.codex_asks.append(entry)
        asked = _Asked(method, record, entry, answered, failed)
        self.request(method, params, result, asked.result, asked.error)

    def interrupt(
        self,
        record: ThreadRecord,
        turn: Turn,
        refused: Callable[[ThreadRecord, InterruptTurn, ErrorObject], None],
    ) -> None:
        """Ask Codex to interrupt ``record``'s ``turn``, once it is named and only once
        (:func:`~bridge.engine.core.turns.interrupting`): its ``turn/completed`` tells how
        it ended; a refusal goes to ``refused``."""
        if not interrupting(turn):
            return
        assert turn.id is not None
        self.ask(
            record,
            InterruptTurn(turn),
            "turn/interrupt",
            codex_types.TurnInterruptParams(threadId=record.id, turnId=turn.id),
            None,
            _interrupted,
            refused,
        )

    def notify(self, method: str, params: Any = msgspec.UNSET) -> None:
        self._out.append(effects.ToCodex(self.peer.notification(method, params)))

    def answer(self, rid: RequestId, result: Any) -> None:
        """Answer a request Codex made."""
        if answering(self.open_requests, rid, "Codex"):
            self._out.append(effects.ToCodex(self.peer.response(rid, result)))

    def read_clock(self, rid: RequestId) -> None:
        """Codex's request ``rid`` is answered with the time, which the shell reads."""
        if rid in self.open_requests:
            self._out.append(effects.ReadClock(rid))

    def ask_clock(self, then: Callable[[int], None]) -> None:
        """Have the shell read the clock for a feature: ``then(unix_seconds)``. The key is
        a string no Codex request id is (Codex numbers its requests)."""
        self._clock_asked += 1
        key = f"bridge-clock-{self._clock_asked}"
        self._clock_waiters[key] = then
        self._out.append(effects.ReadClock(key))

    def machine_request(
        self,
        machine: str,
        method: str,
        params: Any,
        result: Any,
        on_result: OnResult,
        on_error: OnError,
    ) -> None:
        """Ask the exec-server of ``machine`` itself (:class:`~.effects.MachineCall`), as
        :meth:`codex_request` asks Codex: ``on_result`` gets the answer decoded as
        ``result``, ``on_error`` the exec-server's error or the shell's word on why it could
        not ask."""
        self._machine_asked += 1
        key = f"bridge-machine-{self._machine_asked}"
        self._machine_waiters[key] = Outstanding(
            f"{method} on {machine}", decoder(result), on_result, on_error
        )
        self._out.append(effects.MachineCall(machine, key, method, msgspec.json.encode(params)))

    def machine_answered(self, key: str, result: bytes | None, error: ErrorObject | None) -> None:
        """The answer to :meth:`machine_request`'s ``key``: its result (JSON) or its error."""
        waiting = self._machine_waiters.pop(key, None)
        if waiting is None:
            log.warning("an answer from a machine for %s, which nothing waits on", key)
            return
        if error is not None:
            waiting.on_error(error)
        else:
            waiting.result(Raw(result or b"null"))

    def clock_read(self, key: RequestId, unix_seconds: int) -> bool:
        """The clock read for :meth:`ask_clock`'s ``key``, handed on (``False``: not one)."""
        then = self._clock_waiters.pop(key, None)
        if then is None:
            return False
        then(unix_seconds)
        return True

    def refuse(self, rid: RequestId, code: int, message: str) -> None:
        """Answer a request Codex made with an error."""
        if answering(self.open_requests, rid, "Codex"):
            self._out.append(effects.ToCodex(self.peer.error(rid, code, message)))

    def send_raw(self, data: bytes) -> None:
        """A reply the JSON-RPC peer built itself (to a message that was no valid request)."""
        self._out.append(effects.ToCodex(data))

    def refeed(self, message: HeldMessage) -> None:
        """Handle a Codex message the sub-agent gate held as if it arrived now: at once,
        for a held thread's messages go out before what placed it does next (its waiting
        children announced, say)."""
        assert self.router is not None, "no Codex router to hand it back to"
        self.router.refeed(message)


def _interrupted(_record: ThreadRecord, _asked: InterruptTurn, _result: object) -> None:
    """Codex took the interrupt: the turn's ``turn/completed`` tells how it ended."""

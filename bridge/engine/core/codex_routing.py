"""Codex's messages to what reacts to them: one table, method → decoded type → reactors.

Each message Codex sends is decoded once (:mod:`bridge.codex.messages`: the
streamed answer's deltas in one pass, anything else the general way, both giving
the same typed params), then routed by its method's :class:`Route`, the same way
whichever way it was decoded:

1. the route's ``first`` reactors run, whichever thread the message is for
   (``turn/completed``: a closed session's interrupted turn still has commands to
   stop);
2. a message for a thread no session shows is offered to the sub-agent gate
   (:meth:`bridge.engine.features.subagents.subagents.Subagents.gate`), which may hold it
   until the thread is placed; it is handed back, as if it arrived then, through
   :meth:`CodexRouter.refeed` (a route with ``gated=False`` is never held: the time
   is nobody's);
3. a notification goes to the route's ``reactors``, in order (where one event has many
   consequences, the route names one method of the wiring's that calls each in order:
   ``turn/completed``, ``item/completed``...); a request goes to the route's ``answer``,
   which answers it (a request nothing answers is declined, never left waiting).

The table itself is the wiring's (:func:`bridge.engine.routes.codex_routes`):
which features react to a method, and in which order, is read there in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

import msgspec

from ...codex import messages as codex_messages
from ...jsonrpc import ErrorCode, IncomingNotification, IncomingRequest, RequestId, RpcError
from . import AGENT_NAME
from .answers import Outstanding
from .hub import Hub
from .record_parts import HeldMessage
from .replies import Arrived, Router, take_answer

log = logging.getLogger(__name__)

#: One feature's reaction to a notification's typed params.
Reactor: TypeAlias = Callable[[Any], None]
#: What answers a Codex request: its id, its typed params.
Answer: TypeAlias = Callable[[RequestId, Any], None]

_DELTA = codex_messages.AGENT_MESSAGE_DELTA


@dataclass(frozen=True, slots=True)
class Route:
    """Where one method's messages go (see the module docstring)."""

    #: What the params decode into (:func:`bridge.codex.messages.params_type`).
    params: type[Any]
    #: A notification's reactors, in order.
    reactors: tuple[Reactor, ...] = ()
    #: A request's answerer (``None``: a notification).
    answer: Answer | None = None
    #: Run before the sub-agent gate, for every thread.
    first: tuple[Reactor, ...] = ()
    #: Offered to the sub-agent gate when no session shows its thread.
    gated: bool = True
    #: ``reactors`` as one call, made once: the streamed answer's
    #: deltas come this way, each to one reactor.
    react: Reactor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "react", _reaction(self.reactors))


def _reaction(reactors: tuple[Reactor, ...]) -> Reactor:
    if len(reactors) == 1:
        return reactors[0]

    def react(params: Any) -> None:
        for reactor in reactors:
            reactor(params)

    return react


def notification(params: type[Any], *reactors: Reactor, **options: Any) -> Route:
    """The route of a notification whose params decode into ``params``."""
    return Route(params, reactors, **options)


def request(params: type[Any], answer: Answer, **options: Any) -> Route:
    """The route of a request whose params decode into ``params``, answered by ``answer``."""
    return Route(params, answer=answer, **options)


class Gate(Protocol):
    """Holds traffic for a thread no session shows (the sub-agents feature)."""

    def gate(self, thread_id: str, held: HeldMessage) -> bool: ...


class CodexRouter(Router):
    """Decodes each Codex message once and hands it to its route (module docstring)."""

    peer = "codex"

    def __init__(self, hub: Hub, routes: dict[str, Route], *, gate: Gate, arrived: Arrived) -> None:
        super().__init__(hub, arrived)
        hub.codex.router = self  # the gate hands held messages back here
        #: The routing table, by method.
        self.routes = routes
        self._gate = gate
        self._session_ids = hub.threads.session_ids  # read for every Codex message

    def receive(self, data: bytes) -> None:
        """One message from Codex: decoded, then routed."""
        delta = codex_messages.streamed_delta(data)
        if delta is not None:
            self.route(_DELTA, delta, None)
            return
        hub = self.hub
        msg = hub.codex.peer.receive(data)
        if isinstance(msg, IncomingNotification):
            request_id: RequestId | None = None
        elif isinstance(msg, IncomingRequest):
            request_id = msg.id
            self._arrive(request_id, hub.codex.open_requests)
        else:
            take_answer(
                msg,
                on_result=Outstanding.result,
                send_raw=hub.codex.send_raw,
                peer="Codex",
                log=log,
            )
            return
        method = msg.method
        try:
            params = codex_messages.decode_params(method, msg.params)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
            # Codex sent a shape this bridge does not understand: say so once,
            # keep the connection (the next may be fine), never leave it waiting.
            log.warning("Codex %s not understood: %s", method, exc)
            if request_id is not None:
                hub.codex.refuse(request_id, ErrorCode.INVALID_PARAMS, f"not understood: {exc}")
            return
        self.route(method, params, request_id)

    def route(self, method: str, params: Any, request_id: RequestId | None) -> None:
        """A decoded Codex notification or request, to its route."""
        # codex_messages.thread_of, inlined: every streamed delta comes this way.
        thread_id = getattr(params, "threadId", "")
        if not isinstance(thread_id, str):
            thread_id = ""
        route = self.routes.get(method, _UNROUTED)
        if route.first:
            for reactor in route.first:
                reactor(params)
        if (
            thread_id
            and thread_id not in self._session_ids
            and route.gated
            and self._gate.gate(thread_id, HeldMessage(method, params, request_id))
        ):
            return
        if request_id is not None:
            self._request(request_id, method, route, params)
        elif route.reactors:
            route.react(params)
        else:
            log.debug("ignoring Codex notification %s", method)

    def react(self, method: str, params: Any) -> None:
        """A notification's reactors, past the gate (held, then handed back)."""
        self.routes.get(method, _UNROUTED).react(params)

    def refeed(self, message: HeldMessage) -> None:
        """Handle a message the sub-agent gate held, as if it arrived now."""
        if message.request_id is not None:
            route = self.routes.get(message.method, _UNROUTED)
            self._request(message.request_id, message.method, route, message.params)
        else:
            self.react(message.method, message.params)

    def _request(self, rid: RequestId, method: str, route: Route, params: Any) -> None:
        if route.answer is None:
            # Never leave Codex waiting on a request nobody will see.
            log.warning("Codex request %s is not supported; declining", method)
            self.hub.codex.refuse(
                rid, ErrorCode.METHOD_NOT_FOUND, f"{AGENT_NAME} does not support {method}"
            )
            return
        try:
            route.answer(rid, params)
        except RpcError as exc:
            self.hub.codex.refuse(rid, exc.code, exc.message)


#: A method no route names: held like any for a thread no session shows, then
#: ignored (a notification) or declined (a request).
_UNROUTED = Route(codex_messages.Untyped)

"""An exchange with Codex that takes several steps, read top to bottom.

An exchange is a generator: it yields each request (:class:`Ask`) and is resumed with
Codex's answer, decoded into the ask's type, or has :class:`Refused` raised where it
yielded (Codex's error, or Codex lost). The code that reacts to each answer follows the
request in the same function, so a chain (list a thread's commands, then stop one) reads
as it runs, with no callback named for each step. :func:`start` drives one over
:meth:`~bridge.engine.core.codex_link.CodexLink.request`; nothing here does I/O: a request goes out
as the hub's effect, and the exchange waits, suspended, for the answer the engine is given.

Exchanges compose: steps that end with a value (:data:`Steps`) are run inside another with
``value = yield from steps``. ``Ask(..., refuse=rid)`` is the common ending: an error answers client request ``rid``
with Codex's error and ends the exchange, without an ``except``.

A request whose answer changes a thread's record goes through
:meth:`~bridge.engine.core.codex_link.CodexLink.ask` instead, whose entry on the record makes a late
answer stale; an exchange holds no record state across its steps.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from ...jsonrpc import RequestId
from ...jsonrpc.peer import ErrorObject
from .answers import from_codex

if TYPE_CHECKING:
    from .hub import Hub


@dataclass(frozen=True, slots=True)
class Ask:
    """One request of an exchange: Codex's ``method`` with ``params``."""

    method: str
    params: Any = None
    #: The type the answer decodes into; ``None``: the raw answer, unread.
    result: Any = None
    #: A client request Codex's error answers (then the exchange ends), else the error is
    #: raised in the exchange as :class:`Refused`.
    refuse: RequestId | None = None
    #: Asked of that machine's exec-server itself (:meth:`CodexLink.machine_request <bridge.engine.core.codex_link.CodexLink.machine_request>`), not of Codex.
    machine: str | None = None


@dataclass(frozen=True, slots=True)
class All:
    """Several requests at once: the exchange is resumed once every one is answered, with a
    list of their outcomes in order (each the answer, or the :class:`Refused` it met). ``refuse``
    of an ask here is not used: the exchange reads each outcome."""

    asks: tuple[Ask, ...]


@dataclass(frozen=True, slots=True)
class Each:
    """Several exchanges run side by side (each started in order, each going on as its own
    answers come): the exchange that yields this is resumed once every one has ended. Each
    handles its own :class:`Refused`."""

    exchanges: tuple[Exchange, ...]


@dataclass(frozen=True, slots=True)
class Later:
    """A step that is no request of the exchange's own: ``begin(resume)`` starts it, and the
    exchange is resumed with what ``resume`` is called with (work that reports its end to a
    callback: a history read page by page)."""

    begin: Callable[[Callable[[Any], None]], None]


class Refused(Exception):
    """Codex answered an :class:`Ask` (``method``) with an error, or is lost: raised where it
    was asked."""

    def __init__(self, error: ErrorObject, method: str = "") -> None:
        super().__init__(error.message)
        self.error = error
        self.method = method


T = TypeVar("T")

#: What an exchange yields: a request, several at once, exchanges side by side, or a step
#: of another kind.
Step: TypeAlias = "Ask | All | Each | Later"
#: An exchange: yields each :data:`Step`, is sent what it came to.
Exchange: TypeAlias = Generator[Step, Any, None]
#: Steps of an exchange that end with a value (``value = yield from steps``).
Steps: TypeAlias = Generator[Step, Any, T]


def start(hub: Hub, exchange: Exchange) -> None:
    """Run ``exchange`` until its first ask, and on, one step per answer of Codex's."""
    _step(hub, exchange, exchange.__next__)


def _step(hub: Hub, exchange: Exchange, resume: Callable[[], Step]) -> None:
    """Run ``exchange`` on (``resume``: how: its first step, an answer sent, an error thrown)
    until it yields its next step, and take that step."""
    try:
        asked = resume()
    except StopIteration:
        return
    if isinstance(asked, All):
        count = len(asked.asks)
        _Gathered(hub, exchange, [None] * count, count).send(asked.asks)
    elif isinstance(asked, Each):
        _Joined(hub, exchange, len(asked.exchanges)).start(asked.exchanges)
    elif isinstance(asked, Later):
        asked.begin(partial(_resume, hub, exchange))
    else:
        _send(hub, asked, partial(_resume, hub, exchange), partial(_refuse, hub, exchange, asked))


def _resume(hub: Hub, exchange: Exchange, value: Any) -> None:
    _step(hub, exchange, partial(exchange.send, value))


def _refuse(hub: Hub, exchange: Exchange, ask: Ask, error: ErrorObject) -> None:
    if ask.refuse is not None:
        exchange.close()
        hub.client.refuse(ask.refuse, from_codex(error))
        return
    _step(hub, exchange, partial(exchange.throw, Refused(error, ask.method)))


def _send(
    hub: Hub, ask: Ask, answered: Callable[[Any], None], refused: Callable[[ErrorObject], None]
) -> None:
    if ask.machine is None:
        hub.codex.request(ask.method, ask.params, ask.result, answered, refused)
    else:
        hub.codex.machine_request(
            ask.machine, ask.method, ask.params, ask.result, answered, refused
        )


@dataclass(eq=False)
class _Gathered:
    """An :class:`All` under way: each ask's outcome in its place; the exchange resumed with
    them after the last."""

    hub: Hub
    exchange: Exchange
    #: Each ask's outcome, in order, as it comes.
    outcomes: list[Any]
    waiting: int

    def send(self, asks: tuple[Ask, ...]) -> None:
        if not asks:
            _resume(self.hub, self.exchange, self.outcomes)
        for index, ask in enumerate(asks):
            answered = partial(self.settled, index)
            _send(self.hub, ask, answered, partial(self.refused, index, ask.method))

    def refused(self, index: int, method: str, error: ErrorObject) -> None:
        self.settled(index, Refused(error, method))

    def settled(self, index: int, outcome: Any) -> None:
        self.outcomes[index] = outcome
        self.waiting -= 1
        if not self.waiting:
            _resume(self.hub, self.exchange, self.outcomes)


@dataclass(eq=False)
class _Joined:
    """An :class:`Each` under way: the exchange resumed once every one has ended."""

    hub: Hub
    exchange: Exchange
    running: int

    def start(self, exchanges: tuple[Exchange, ...]) -> None:
        self.running += 1  # this start too, so that one ending at once ends nothing
        for each in exchanges:
            start(self.hub, _then(each, self.ended))
        self.ended()

    def ended(self) -> None:
        self.running -= 1
        if not self.running:
            _resume(self.hub, self.exchange, None)


def _then(exchange: Exchange, ended: Callable[[], None]) -> Exchange:
    yield from exchange
    ended()

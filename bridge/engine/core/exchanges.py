"""An exchange with Codex that takes several steps, read top to bottom.

An exchange is a generator: it yields each request (:class:`Ask`) and is resumed with
Codex's answer, decoded into the ask's type, or has :class:`Refused` raised where it
yielded (Codex's error, or Codex lost). The code that reacts to each answer follows the
request in the same function, so a chain (list a thread's commands, then stop one) reads
as it runs, with no callback named for each step. :func:`start` drives one over
:meth:`~bridge.engine.core.hub.Hub.codex_request`; nothing here does I/O: a request goes out
as the hub's effect, and the exchange waits, suspended, for the answer the engine is given.

Exchanges compose: steps that end with a value (:data:`Steps`) are run inside another with
``value = yield from steps``. ``Ask(..., refuse=rid)`` is the common ending: an error answers client request ``rid``
with Codex's error and ends the exchange, without an ``except``.

A request whose answer changes a thread's record goes through
:meth:`~bridge.engine.core.hub.Hub.ask` instead, whose entry on the record makes a late
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
    #: Asked of that machine's exec-server itself (:meth:`Hub.machine_request`), not of Codex.
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
    try:
        asked = resume()
    except StopIteration:
        return
    if isinstance(asked, All):
        _all(hub, exchange, asked.asks)
        return
    if isinstance(asked, Each):
        _each(hub, exchange, asked.exchanges)
        return
    if isinstance(asked, Later):
        asked.begin(lambda value: _step(hub, exchange, lambda: exchange.send(value)))
        return
    ask = asked

    def answered(result: Any) -> None:
        _step(hub, exchange, lambda: exchange.send(result))

    def refused(error: ErrorObject) -> None:
        if ask.refuse is not None:
            exchange.close()
            hub.refuse_client(ask.refuse, from_codex(error))
            return
        _step(hub, exchange, lambda: exchange.throw(Refused(error, ask.method)))

    _send(hub, ask, answered, refused)


def _send(
    hub: Hub, ask: Ask, answered: Callable[[Any], None], refused: Callable[[ErrorObject], None]
) -> None:
    if ask.machine is None:
        hub.codex_request(ask.method, ask.params, ask.result, answered, refused)
    else:
        hub.machine_request(ask.machine, ask.method, ask.params, ask.result, answered, refused)


def _all(hub: Hub, exchange: Exchange, asks: tuple[Ask, ...]) -> None:
    """Every ask of an :class:`All` sent at once; the exchange resumed after the last answer."""
    outcomes: list[Any] = [None] * len(asks)
    waiting = set(range(len(asks)))

    def settled(index: int, outcome: Any) -> None:
        outcomes[index] = outcome
        waiting.discard(index)
        if not waiting:
            _step(hub, exchange, lambda: exchange.send(outcomes))

    if not asks:
        _step(hub, exchange, lambda: exchange.send(outcomes))
    for index, ask in enumerate(asks):
        answered: Callable[[Any], None] = partial(settled, index)
        refused: Callable[[ErrorObject], None] = partial(_refused, settled, index, ask.method)
        _send(hub, ask, answered, refused)


def _each(hub: Hub, exchange: Exchange, exchanges: tuple[Exchange, ...]) -> None:
    """Every exchange started in order; ``exchange`` resumed once the last has ended."""
    running = [len(exchanges) + 1]  # and this start, so that one ending at once ends nothing

    def ended() -> None:
        running[0] -= 1
        if not running[0]:
            _step(hub, exchange, lambda: exchange.send(None))

    for each in exchanges:
        start(hub, _then(each, ended))
    ended()


def _then(exchange: Exchange, ended: Callable[[], None]) -> Exchange:
    yield from exchange
    ended()


def _refused(
    settled: Callable[[int, Any], None], index: int, method: str, error: ErrorObject
) -> None:
    settled(index, Refused(error, method))

"""What the engine asks the shell to do: send these bytes to that side, read the clock, or
reach a machine."""

from __future__ import annotations

from typing import Any

import msgspec

from ...jsonrpc import RequestId


# Frozen Structs, not frozen dataclasses: one is built for every streamed delta, and a
# frozen dataclass sets each field through ``object.__setattr__`` (several times slower).
class ToClient(msgspec.Struct, frozen=True):
    """One complete JSON-RPC message for the ACP client (one line on stdout)."""

    data: bytes
    #: The session a ``session/update`` is for (``None``: a response, a request...).
    session_id: str | None = None
    #: That update, for the outbox to merge it with the one before it if it may and
    #: the client is behind (see :mod:`bridge.engine.core.outbox`).
    update: Any = None


class ToCodex(msgspec.Struct, frozen=True):
    """One complete JSON-RPC message for Codex's app-server."""

    data: bytes


class ReadClock(msgspec.Struct, frozen=True):
    """Codex asks for the time (``currentTime/read``), or a feature needs it, which the
    engine does not keep: the shell reads the wall clock and hands it back with
    ``Engine.clock_read``."""

    request_id: RequestId


class MachineWanted(msgspec.Struct, frozen=True):
    """A prompt needs the machine ``name`` (``bridge.engine.core.machines``): the shell
    reaches it, if it has not, and tells the engine how that went with
    ``Engine.machine_changed``. A session's own place on a per-session machine is named by
    its environment (``session_environment``), with the session's folders (a new
    container mounts them)."""

    name: str
    folders: tuple[str, ...] = ()


class MachineReleased(msgspec.Struct, frozen=True):
    """The session of environment ``name`` (a per-session machine's) is closed or deleted:
    the shell removes its place (its container)."""

    name: str


class MachineChosen(msgspec.Struct, frozen=True):
    """The user picked machine ``machine`` for thread ``thread_id``: the shell stores it,
    since Codex forgets a thread's environments when it restarts, and hands it back through
    the ``stored_machine`` function the engine was given."""

    thread_id: str
    machine: str


class MachineCall(msgspec.Struct, frozen=True):
    """A request for the ``codex exec-server`` of machine ``machine`` itself (its own
    methods, such as ``fs/readFile``: Codex's app-server has none that reach a machine's
    files): the shell sends it there on a connection of its own and hands the answer back
    with ``Engine.machine_answered(key, ...)``, an error when it cannot reach the machine."""

    machine: str
    #: The engine's name for the call (``bridge-machine-N``), echoed in the answer.
    key: str
    method: str
    #: The parameters, JSON.
    params: bytes


Effect = (
    ToClient | ToCodex | ReadClock | MachineWanted | MachineChosen | MachineCall | MachineReleased
)

"""The machines a session may act on, as the engine knows them: what the user named, and
what the shell last said of each link.

A machine is a Codex *environment*: an exec-server somewhere else, registered with Codex
(``environment/add``) under the machine's name. The app-server's own machine is
:data:`LOCAL`, always there. The shell runs the links (``bridge/shell/machine_link.py``)
and tells the engine each change of their state (``Engine.machine_changed``); the engine
asks for a link when a prompt needs one (:class:`~.effects.MachineWanted`) and never
touches a socket itself.

States, as the shell reports them::

    idle        nothing asked of it yet (the link starts at the first prompt that needs it)
    connecting  the shell is reaching it (a first start, or a link brought back)
    connected   ready: a turn may act there
    down        the last attempt failed; ``reason`` in ssh's or Codex's own words
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

#: The app-server's own machine, as Codex names its environment.
LOCAL = "local"


class MachineState(StrEnum):
    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class Registration:
    """How Codex reaches a machine: ``environment/add``'s URL and bearer token. ``None``
    on an offer: another process registered it (the bridge's daemon)."""

    url: str
    token: str | None


@dataclass(frozen=True, slots=True)
class MachineOffer:
    """A machine the user named: its name (the environment's id), where its sessions work
    (``""``: the session's own ``cwd`` path, on that machine), a description for the
    picker, and its registration."""

    name: str
    path: str = ""
    description: str = ""
    registration: Registration | None = None
    #: Each session gets its own place (a fresh container): a Codex environment of its own,
    #: :func:`session_environment`, whose registration URL is the offer's with the thread's
    #: id as its path.
    per_session: bool = False


@dataclass(slots=True)
class Machine:
    """One machine's offer and the link's last state."""

    offer: MachineOffer
    state: MachineState = MachineState.IDLE
    reason: str = ""
    #: Why the link went down since the current turn there began ("": it did not): a
    #: command that failed meanwhile failed for it, even once Codex has connected again.
    lost: str = ""

    @property
    def name(self) -> str:
        return self.offer.name


#: Between a per-session machine's name and the thread's id in its environment's id.
SESSION_MARK = "@"


def session_environment(machine: str, thread_id: str) -> str:
    """The Codex environment of thread ``thread_id`` on per-session machine ``machine``."""
    return f"{machine}{SESSION_MARK}{thread_id}"


def machine_of(environment_id: str) -> str:
    """The machine an environment is (a session's own: the machine it was made from)."""
    return environment_id.partition(SESSION_MARK)[0]


def workspace(offer: MachineOffer | None, cwd: str) -> str:
    """Where a session whose own folder is ``cwd`` works on that machine."""
    if offer is None or not offer.path:
        return cwd
    return offer.path

"""What the bridge knows of one machine's link (:class:`Link`), and of a session's own
container on a sandbox machine (:class:`Box`): written by :mod:`bridge.shell.machine_link`,
read where the link is checked and prepared."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field, replace

import trio

from .. import machines as spec_of
from ..machines import MachineSpec


@dataclass(eq=False)
class Link:
    """One machine: its spec, where Codex reaches it, and what the link last was."""

    spec: MachineSpec
    url: str
    token: str | None
    state: str = "idle"
    reason: str = ""
    #: The remote Codex's version, from the last check.
    version: str = ""
    listener: socket.socket | None = None
    checking: bool = False
    #: Wakes the task bringing a dropped link back (a prompt wants it now).
    wanted: trio.Event = field(default_factory=trio.Event)
    bringing_back: bool = False
    #: Live relays (Codex's connections), for the status.
    relays: int = 0
    #: When (trio's clock) a relay last began while the link was down.
    tried_down: float = float("-inf")
    #: Through the daemon: its last word on the link that this process took in (read
    #: before a check of its own, or followed). Only a new word is news: the same one
    #: again is older than what this process's own check found since.
    heard: tuple[str, str] | None = None
    #: When (trio's clock) Codex's last connection failed (ssh did, or it was refused while
    #: the link was down); ``None`` once one reached the machine.
    codex_failed: float | None = None
    #: Codex's connections that reached the machine, now.
    codex_on: int = 0
    #: Codex's connections accepted but not at the machine yet (held while Codex is
    #: brought there, or while the exec-server starts): a check that ends meanwhile says
    #: ``connected`` only once one is there, or Codex's next command would find none.
    codex_coming: int = 0
    #: Set when one of Codex's connections reaches the machine.
    codex_back: trio.Event = field(default_factory=trio.Event)
    #: The Codex the bridge brought into the container, once found working there.
    brought: str | None = None
    #: Held while a check may bring Codex (one copy at a time), or a dev container up.
    bringing: trio.Lock = field(default_factory=trio.Lock)
    #: A dev container, once ``devcontainer up`` said which: the container reached.
    container: MachineSpec | None = None
    #: A session's own container on a sandbox machine: what makes it.
    box: Box | None = None
    #: Whether this process runs the link (its listener, or a ws machine it registers),
    #: not only checks it (an editor attached to the daemon, whose links the daemon runs).
    here: bool = True

    @property
    def prepared(self) -> bool:
        """Whether a check prepares the place before anything runs there: brings Codex
        into it, brings a dev container up, or makes a session's container."""
        return (
            bool(self.spec.bring)
            or self.spec.scheme == spec_of.DEVCONTAINER
            or self.box is not None
        )

    @property
    def ready(self) -> bool:
        """Whether what a check prepares is there (as far as this process knows)."""
        if self.spec.scheme == spec_of.DEVCONTAINER and self.container is None:
            return False
        if self.box is not None and not self.box.made:
            return False
        return not self.spec.bring or self.brought is not None


@dataclass(eq=False)
class Box:
    """A session's own container on a sandbox machine (``image =``): made at the first
    prompt there, from the machine's spec, with the session's folders; removed when the
    session goes, or this process does."""

    machine: MachineSpec
    folders: tuple[str, ...]
    made: bool = False


def in_use(link: Link) -> MachineSpec:
    """The machine as the link reaches it: a dev container as the container it is, with the
    Codex brought there, if it was."""
    place = link.container or link.spec
    return replace(place, codex=link.brought) if link.brought else place

"""Feature: the machines a session may act on, registered with Codex and waited for.

Each machine the user named is a Codex environment under the machine's name
(:mod:`bridge.engine.core.machines`). Once Codex's handshake is done (again after a
restart: a new Codex knows none), every machine this bridge reaches itself is registered
(``environment/add``, a loopback URL and a token of the shell's). A prompt for a session
on a machine waits here (:meth:`Machines.when_ready`) until the link is up and Codex has the
registration, or fails with the reason, naming the machine: Codex itself would start the
turn and let its commands fail quietly ("no usable execution environment"), told to the
model and never to the user.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ....codex import types as codex_types
from ....jsonrpc.peer import ErrorObject
from ...core.effects import MachineWanted
from ...core.hub import Hub
from ...core.machines import LOCAL, Machine, MachineOffer, MachineState

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Waiter:
    ready: Callable[[], None]
    failed: Callable[[str], None]


@dataclass(slots=True)
class _Link:
    machine: Machine
    #: ``environment/add`` sent and not answered yet (a turn there waits for it).
    registering: bool = False
    #: Codex refused the registration: why (every prompt there fails with it).
    refused: str = ""
    waiters: list[_Waiter] = field(default_factory=list)


class Machines:
    def __init__(self, hub: Hub, offers: Sequence[MachineOffer]) -> None:
        self.hub = hub
        self._links = {o.name: _Link(Machine(o)) for o in offers if o.name != LOCAL}
        hub.machines = {name: link.machine for name, link in self._links.items()}

    def names(self) -> list[str]:
        return list(self._links)

    def register(self) -> None:
        """Codex's handshake is done: register each machine the shell reaches."""
        for name, link in self._links.items():
            registration = link.machine.offer.registration
            if registration is None:
                continue  # registered by whoever runs its link (the bridge's daemon)
            params = codex_types.EnvironmentAddParams(
                environmentId=name, execServerUrl=registration.url
            )
            if registration.token is not None:
                params.authBearerToken = registration.token
            link.registering, link.refused = True, ""

            def added(_result: object, link: _Link = link) -> None:
                link.registering = False
                self._settle(link)

            def refused(error: ErrorObject, link: _Link = link) -> None:
                link.registering = False
                link.refused = f"Codex refused the machine: {error.message}"
                log.warning("machine %s: %s", link.machine.name, link.refused)
                self._settle(link)

            self.hub.codex_request("environment/add", params, None, added, refused)

    def when_ready(
        self, name: str, ready: Callable[[], None], failed: Callable[[str], None]
    ) -> None:
        """``ready()`` once machine ``name`` can take a turn, else ``failed(reason)``."""
        link = self._links.get(name)
        if link is None:
            failed(f"no machine named {name!r} (machines: {', '.join(self._links) or 'none'})")
            return
        link.waiters.append(_Waiter(ready, failed))
        # A link of another process's (the daemon's) may have dropped unseen: the shell
        # says before every prompt there (it asks the daemon, or the machine).
        theirs = link.machine.offer.registration is None
        if link.machine.state is not MachineState.CONNECTED or theirs:
            link.machine.state = MachineState.CONNECTING
            self.hub.effect(MachineWanted(name))
        self._settle(link)

    def changed(self, name: str, state: str, reason: str) -> None:
        """The shell's word on machine ``name``'s link."""
        link = self._links.get(name)
        if link is None:
            log.warning("state of an unknown machine %r: %s", name, state)
            return
        try:
            link.machine.state = MachineState(state)
        except ValueError:
            log.warning("machine %s: unknown state %r", name, state)
            return
        link.machine.reason = reason
        if link.machine.state is MachineState.DOWN:
            link.machine.lost = reason
        log.info("machine %s: %s%s", name, state, f" ({reason})" if reason else "")
        self._settle(link)

    def environment_disconnected(self, note: codex_types.EnvironmentConnection) -> None:
        """``thread/environment/disconnected``: Codex lost its connection to the machine (a
        link of another process's, the daemon's, says so to nobody else). The next prompt
        there checks it again; a command that fails meanwhile failed for it."""
        link = self._links.get(note.environmentId)
        if link is None or link.machine.state is not MachineState.CONNECTED:
            return
        link.machine.state = MachineState.IDLE
        link.machine.lost = link.machine.lost or "Codex lost its connection to it"
        log.info("machine %s: Codex disconnected from it", link.machine.name)

    def environment_connected(self, note: codex_types.EnvironmentConnection) -> None:
        """``thread/environment/connected``: Codex reached the machine, whoever's link it is."""
        link = self._links.get(note.environmentId)
        if link is None or link.machine.state is MachineState.CONNECTED:
            return
        link.machine.state, link.machine.reason = MachineState.CONNECTED, ""
        self._settle(link)

    def _settle(self, link: _Link) -> None:
        machine = link.machine
        if link.registering or not link.waiters:
            return
        if link.refused:
            self._fail(link, link.refused)
        elif machine.state is MachineState.DOWN:
            self._fail(link, machine.reason or "the link is down")
        elif machine.state is MachineState.CONNECTED:
            waiters, link.waiters = link.waiters, []
            for waiter in waiters:
                waiter.ready()

    def _fail(self, link: _Link, reason: str) -> None:
        waiters, link.waiters = link.waiters, []
        for waiter in waiters:
            waiter.failed(f"machine {link.machine.name} is not reachable: {reason}")

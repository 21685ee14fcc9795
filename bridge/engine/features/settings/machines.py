"""Feature: the machines a session may act on, registered with Codex and waited for.

Each machine the user named is a Codex environment under the machine's name
(:mod:`bridge.engine.core.machines`). Once Codex's handshake is done (again after a
restart: a new Codex knows none), every machine this bridge reaches itself is registered
(``environment/add``, a loopback URL and a token of the shell's). A prompt for a session
on a machine waits here (:meth:`Machines.when_ready`) until the link is up and Codex has the
registration, or fails with the reason, naming the machine: Codex itself would start the
turn and let its commands fail quietly ("no usable execution environment"), told to the
model and never to the user.

A per-session machine (a fresh container for each session) is a Codex environment per
session (``session_environment``): registered at the session's first prompt there, with
its own URL (the machine's, the thread's id as its path), wanted with the session's
folders (the shell makes the container, mounting them), and released when the session is
closed or deleted (the shell removes the container).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ....acp import types as acp_types
from ....codex import types as codex_types
from ...core import exchanges
from ...core.effects import MachineReleased, MachineWanted
from ...core.exchanges import Ask, Exchange, Refused
from ...core.hub import Hub
from ...core.machines import (
    LOCAL,
    Machine,
    MachineOffer,
    MachineState,
    Registration,
    machine_of,
    session_environment,
)
from ...core.threads import ThreadRecord

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
        #: Each session's own place on a per-session machine, by its environment's id.
        self._sessions: dict[str, _Link] = {}

    def names(self) -> list[str]:
        return list(self._links)

    def per_session(self, name: str) -> bool:
        """Whether machine ``name`` gives each session a place of its own."""
        link = self._links.get(name)
        return link is not None and link.machine.offer.per_session

    def register(self) -> None:
        """Codex's handshake is done: register each machine the shell reaches (a new
        Codex knows none: each session's own place again too)."""
        for link in [*self._links.values(), *self._sessions.values()]:
            if not link.machine.offer.per_session:
                self._register(link)

    def _register(self, link: _Link) -> None:
        name = link.machine.name
        registration = link.machine.offer.registration
        if registration is None:
            return  # registered by whoever runs its link (the bridge's daemon)
        params = codex_types.EnvironmentAddParams(
            environmentId=name, execServerUrl=registration.url
        )
        if registration.token is not None:
            params.authBearerToken = registration.token
        link.registering, link.refused = True, ""
        exchanges.start(self.hub, self._registered(link, params))

    def _registered(self, link: _Link, params: codex_types.EnvironmentAddParams) -> Exchange:
        """Codex adds the machine as an environment; its link settles either way."""
        try:
            yield Ask("environment/add", params)
        except Refused as refused:
            link.refused = f"Codex refused the machine: {refused}"
            log.warning("machine %s: %s", link.machine.name, link.refused)
        link.registering = False
        self._settle(link)

    def when_ready(
        self,
        name: str,
        ready: Callable[[], None],
        failed: Callable[[str], None],
        thread_id: str = "",
        folders: tuple[str, ...] = (),
    ) -> None:
        """``ready()`` once machine ``name`` can take a turn (of thread ``thread_id``, whose
        folders are ``folders``), else ``failed(reason)``."""
        link = self._links.get(name)
        if link is None:
            failed(f"no machine named {name!r} (machines: {', '.join(self._links) or 'none'})")
            return
        wanted: tuple[str, ...] = ()
        if link.machine.offer.per_session:
            link, wanted = self._session_link(link, thread_id), folders
        link.waiters.append(_Waiter(ready, failed))
        # A link of another process's (the daemon's) may have dropped unseen: the shell
        # says before every prompt there (it asks the daemon, or the machine).
        theirs = link.machine.offer.registration is None
        if link.machine.state is not MachineState.CONNECTED or theirs:
            link.machine.state = MachineState.CONNECTING
            self.hub.effect(MachineWanted(link.machine.name, wanted))
        self._settle(link)

    def turn_starting(self, name: str) -> None:
        """A turn starts on machine ``name``: the reason its link was lost is behind it (a
        command of the turn that fails says its own)."""
        link = self._links.get(name)
        if link is not None:
            link.machine.lost = ""

    def _session_link(self, machine: _Link, thread_id: str) -> _Link:
        """Thread ``thread_id``'s own place on per-session ``machine``: registered with
        Codex at its first prompt there."""
        environment = session_environment(machine.machine.name, thread_id)
        link = self._sessions.get(environment)
        if link is None:
            offer = machine.machine.offer
            registration = offer.registration
            if registration is not None:
                registration = Registration(f"{registration.url}/{thread_id}", registration.token)
            own = MachineOffer(environment, offer.path, offer.description, registration)
            link = self._sessions[environment] = _Link(Machine(own))
            self._register(link)
        return link

    def environment(self, name: str, thread_id: str) -> str:
        """The Codex environment a turn of ``thread_id`` on machine ``name`` acts in."""
        return session_environment(name, thread_id) if self.per_session(name) else name

    def session_opened(self, record: ThreadRecord) -> None:
        """A stored session opened (a load, a resume) on a per-session machine: the
        container it had went when it was closed (or when the bridge that made it ended),
        and the user is told the next prompt starts a fresh one."""
        settings = record.settings
        if record.life.unstored or settings is None or not self.per_session(settings.machine):
            return
        if session_environment(settings.machine, record.id) in self._sessions:
            return  # this bridge holds its container still (the session opened again)
        offer = self.hub.machines[settings.machine].offer
        text = (
            f"This session works on {settings.machine} ({offer.description}): the container "
            "it had is gone, with what it held outside this session's folders; the next "
            "prompt there starts a fresh one.\n"
        )
        self.hub.client.update(
            record.id,
            acp_types.AgentMessageChunk(
                content=acp_types.TextContent(text=text), messageId=f"{record.id}-fresh-container"
            ),
        )

    def release(self, thread_id: str) -> None:
        """Thread ``thread_id`` is closed or deleted: its own places go."""
        for environment, link in list(self._sessions.items()):
            if environment == session_environment(machine_of(environment), thread_id):
                del self._sessions[environment]
                self._fail(link, "its session was closed")
                self.hub.effect(MachineReleased(environment))

    def _link(self, name: str) -> _Link | None:
        return self._links.get(name) or self._sessions.get(name)

    def changed(self, name: str, state: str, reason: str) -> None:
        """The shell's word on machine ``name``'s link."""
        link = self._link(name)
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
        link = self._link(note.environmentId)
        if link is None or link.machine.state is not MachineState.CONNECTED:
            return
        link.machine.state = MachineState.IDLE
        link.machine.lost = link.machine.lost or "Codex lost its connection to it"
        log.info("machine %s: Codex disconnected from it", link.machine.name)

    def environment_connected(self, note: codex_types.EnvironmentConnection) -> None:
        """``thread/environment/connected``: Codex reached the machine, whoever's link it is."""
        link = self._link(note.environmentId)
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

"""The links to the machines the user named: each a loopback WebSocket Codex connects to,
relayed over the user's own ssh to a ``codex exec-server --listen stdio`` there (or over
``podman exec -i``/``docker exec -i`` into a container, or a command machine's own
command: whatever :func:`bridge.machines.exec_server_argv` runs, its stdio an exec-server).

For an ssh machine the bridge listens on 127.0.0.1 (a port of its own) and registers that
URL with Codex, with a token made fresh at every start that only Codex and this process
know (it is in no argv: Codex gets it in ``environment/add``, over its pipe). Each
connection Codex makes (it reconnects by itself after a drop) starts one ssh, whose
remote command prints the remote Codex's version and then runs the exec-server on the
channel's stdio; each WebSocket text frame is one line of it, both ways. Nothing listens
on the remote machine, and the conversation, sign-in and model stay here.

The engine asks for a machine when a prompt needs it (``MachineWanted``): the link checks
it (``ssh HOST codex --version``: reachable, logged in, the same Codex) and says
``connected`` or ``down`` with ssh's own words. A link that drops while Codex uses it is
``down`` at once, and brought back with backoff (a prompt meanwhile checks it at once).
Found back after a connection of Codex's failed, it stays ``connecting`` until Codex's
next connection reaches it, or Codex's pause before that one is over
(:data:`CODEX_RETRY_SECONDS`): a prompt sent in that pause would do nothing, silently.
A container or a command machine is the same, but for the first line: with no remote
shell to say Codex's version first, the check runs ``CODEX --version`` there, and a
connection counts as reached at the exec-server's first line (its answer to Codex's
``initialize``); a runtime that ends before it (a missing or stopped container: podman's
exit status 125) has its own words said. A container whose ``codex`` is missing or of
another version, when the user named none (or said ``?codex=auto``), is given this
bridge's own: the check copies the vendor folder of the Codex it runs into the container
(``podman cp``, once per container and version: one there already is used; copied beside,
then renamed, so that two bridges copying at once leave one whole copy) and the link runs
that one (:meth:`MachineLinks.in_use`). Codex gives a connection some 10 s to answer and a
command waits on one under way, then fails: its connections are turned away while Codex is
copied there (a copy can take that long), and a check says ``connected`` only once one of
them is at the machine. A ws:// machine (an exec-server someone runs)
is registered as it is; its check is a TCP connection.

Through the bridge's daemon the daemon runs the links and registers them with its Codex;
an editor's ``serve`` keeps check-only links (``relay=False``): no listener, nothing to
register, and a check each time the engine asks (after Codex said it lost the machine),
so that a prompt fails with ssh's words rather than quietly in Codex.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import trio
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.trio.server import ServerConnection, serve

from .. import machines as spec_of
from ..engine import MachineOffer, Registration
from ..machines import MachineSpec
from .codex_there import COPY_SECONDS, CodexThere
from .dev_containers import UP_SECONDS, up
from .link_record import Box, Link, in_use
from .machine_store import ThreadMachines
from .processes import (
    CHECK_SECONDS,
    CLOSE_SECONDS,
    MAX_MESSAGE,
    Lines,
    StderrTail,
    could_not_run,
)
from .sandboxes import make_box, remove_box, sweep_boxes

log = logging.getLogger(__name__)
#: websockets' own log of each connection: its warnings only.
logging.getLogger(f"{__name__}.websockets").setLevel(logging.WARNING)

#: Between attempts to bring a dropped link back: doubling up to the last.
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)

#: While a link is down, Codex's connections (it tries again several times a second) run
#: one ssh per this many seconds; the others are refused at once, with no ssh.
DOWN_RETRY_SECONDS = 1.0
#: How often an editor attached to the daemon reads the daemon's word on its links.
PUBLISHED_POLL_SECONDS = 0.5
#: After a connection of Codex's to a machine failed, Codex pauses (about a second) before
#: it connects again, and a command it runs in the pause fails at once, told only to the
#: model ("No usable execution environment"). A machine found back is said connected once
#: Codex's next connection reached it or this long after Codex's last one failed.
CODEX_RETRY_SECONDS = 3.0

OnChange = Callable[[str, str, str], None]
#: The states the daemon publishes: ``{name: (state, reason)}``.
Published = Callable[[], dict[str, tuple[str, str]]]


class MachineLinks:
    """The links of one Codex (``serve``'s own, or the daemon's)."""

    def __init__(
        self,
        specs: Sequence[MachineSpec],
        *,
        ssh: list[str],
        codex_program: str | None = None,
        codex_version: str | None = None,
        on_change: OnChange | None = None,
        relay: bool = True,
        published: Published | None = None,
    ) -> None:
        self.ssh = ssh
        self.relay = relay
        self._published = published
        self.on_change: OnChange = on_change or (lambda _n, _s, _r: None)
        self.links: dict[str, Link] = {}
        #: The machines' Codex: checked against this bridge's, brought where it must be.
        self.codex = CodexThere(ssh, codex_program, codex_version)
        self._nursery: trio.Nursery | None = None
        self._early_wants: list[str] = []
        #: Which machine each thread works on, for the next bridge.
        self.store = ThreadMachines()
        for spec in specs:
            if not relay and spec.scheme != spec_of.SANDBOX:
                # The daemon's link; a sandbox machine's, each session's container, is run
                # by the bridge of the session (the daemon offers none).
                link = Link(spec, "", None, here=False)
            elif spec.relayed:
                # Bound now, before trio runs, so that the engine built before it can
                # register the URL; served from run().
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", 0))
                sock.listen(16)
                sock.setblocking(False)
                port = sock.getsockname()[1]
                link = Link(spec, f"ws://127.0.0.1:{port}", secrets.token_urlsafe(32))
                link.listener = sock
            else:
                token = _read_token(spec)
                link = Link(spec, spec.url, token)
            self.links[spec.name] = link

    def offers(self) -> list[MachineOffer]:
        """What the engine offers and registers."""
        return [
            MachineOffer(
                name=name,
                path=link.spec.path,
                description=link.spec.description or link.spec.where(),
                registration=Registration(link.url, link.token) if link.here else None,
                per_session=link.spec.scheme == spec_of.SANDBOX,
            )
            for name, link in self.links.items()
            if link.box is None
        ]

    def close(self) -> None:
        """Release the listeners (a link never run)."""
        for link in self.links.values():
            if link.listener is not None:
                link.listener.close()

    # -- the engine's asks -------------------------------------------------------------

    def want(self, name: str, folders: tuple[str, ...] = ()) -> None:
        """A prompt needs machine ``name``: check it now, unless it is connected. A
        session's own place on a sandbox machine (``MACHINE@THREAD``) is made for it, with
        its ``folders``."""
        link = self.links.get(name) or self._session_link(name, folders)
        if link is None:
            self.on_change(name, "down", f"no machine named {name}")
            return
        if link.state == "connected" and link.here:
            # The relay sees a drop at once: connected is what it is.
            self.on_change(name, "connected", "")
            return
        if self._published is not None and not link.here:
            # The daemon's relay: its word, read now, unless it says the link is down.
            word = self._published().get(name, ("", ""))
            link.heard = word
            if word[0] == "connected":
                link.state, link.reason = "connected", ""
                self.on_change(name, "connected", "")
                return
        if self._nursery is None:
            self._early_wants.append(name)
            return
        link.wanted.set()
        self._check_soon(link)

    def _check_soon(self, link: Link) -> None:
        """Check ``link`` now, unless a check (or bringing it back) is under way."""
        assert self._nursery is not None
        if not link.checking and not link.bringing_back:
            # Checking from now on, not once the task starts: what the daemon said
            # meanwhile is no answer to this prompt (its own check is).
            link.checking = True
            self._nursery.start_soon(self._check_now, link)

    # -- running -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve every ssh machine's listener until cancelled; then remove the sessions'
        own containers."""
        try:
            await self._run(task_status)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(CHECK_SECONDS):
                async with trio.open_nursery() as removing:
                    for name in [n for n, link in self.links.items() if link.box is not None]:
                        removing.start_soon(remove_box, self.links.pop(name))

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for link in self.links.values():
                if link.listener is not None:
                    nursery.start_soon(self._serve, link)
            task_status.started()
            for name in self._early_wants:
                self.want(name)
            self._early_wants.clear()
            runtimes = {
                link.spec.runtime
                for link in self.links.values()
                if link.spec.scheme == spec_of.SANDBOX
            }
            if runtimes:
                nursery.start_soon(sweep_boxes, runtimes)
            if self._published is not None:
                await self._follow_published()
            # Open for the checks to come, with no listener too (ws:// machines, or the
            # check-only links of an editor attached to the daemon).
            await trio.sleep_forever()

    async def _follow_published(self) -> None:
        """Check-only links take the daemon's word on its links: its relays see a drop at
        once, where Codex tells an editor only once it gives up (some 45 s)."""
        assert self._published is not None
        while True:
            for name, (state, reason) in self._published().items():
                link = self.links.get(name)
                if link is None or link.heard == (state, reason):
                    # Heard already: a check here since (a prompt's) knows better.
                    continue
                link.heard = (state, reason)
                if link.checking or state in ("idle", "connecting"):
                    continue
                if state == "down":
                    self._set(link, "down", reason)
                elif state == "connected" and link.state == "down":
                    self._set(link, "connected")
            await trio.sleep(PUBLISHED_POLL_SECONDS)

    async def _serve(self, served: Link) -> None:
        assert served.listener is not None
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(served.listener))

        def target(path: str) -> Link | None:
            """The link a connection is for: a sandbox machine's URL path names the
            session (its thread) whose own container it reaches."""
            if served.spec.scheme != spec_of.SANDBOX:
                return served
            thread = path.partition("?")[0].strip("/")
            return self.links.get(f"{served.spec.name}{spec_of.SESSION_MARK}{thread}")

        def authorize(_connection: ServerConnection, request: Request) -> Response | None:
            given = request.headers.get("Authorization", "")
            expected = f"Bearer {served.token}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                log.warning("machine %s: a connection without its token refused", served.spec.name)
                return Response(401, "Unauthorized", Headers([("Content-Length", "0")]), b"")
            link = target(request.path)
            if link is None:  # a session's container removed since
                return Response(404, "Not Found", Headers([("Content-Length", "0")]), b"")
            if link.prepared and link.bringing.locked():
                # Codex is being brought there (a copy takes seconds, more than Codex waits
                # for a connection's first answer): Codex comes back in a moment.
                link.codex_failed = trio.current_time()
                return Response(503, "Service Unavailable", Headers([("Content-Length", "0")]), b"")
            if link.state == "down":
                now = trio.current_time()
                if now - link.tried_down < DOWN_RETRY_SECONDS:
                    link.codex_failed = now
                    return Response(
                        503, "Service Unavailable", Headers([("Content-Length", "0")]), b""
                    )
                link.tried_down = now
            return None

        async def handler(connection: ServerConnection) -> None:
            link = target(connection.request.path if connection.request else "")
            if link is None:
                await connection.aclose(1011, "no such session here")
                return
            await self._relay(link, connection)

        await serve(
            handler,
            listeners=[listener],
            process_request=authorize,
            max_size=MAX_MESSAGE,
            compression=None,
            logger=logging.getLogger(f"{__name__}.websockets"),
        )

    def _set(self, link: Link, state: str, reason: str = "") -> None:
        if (link.state, link.reason) == (state, reason):
            return
        link.state, link.reason = state, reason
        if state == "down":
            log.warning("machine %s is down: %s", link.spec.name, reason)
        else:
            log.info("machine %s: %s", link.spec.name, state)
        self.on_change(link.spec.name, state, reason)

    async def check(self, link: Link) -> str | None:
        """Reach the machine once; ``None`` when it works, else why not. A container given
        no Codex by the user gets this bridge's, when its own will not do."""
        spec = link.spec
        if not spec.relayed:
            return await _check_tcp(spec)
        if not link.prepared:
            return (await self.codex.check_codex(link, spec))[0]
        async with link.bringing:
            if link.box is not None:
                why = await make_box(link, link.box, self.codex.codex_program)
                return why if why is not None else (await self.codex.check_codex(link, spec))[0]
            if spec.scheme == spec_of.DEVCONTAINER:
                why = await up(link)
                if why is not None:
                    return why
                if not spec.bring:
                    return (await self.codex.check_codex(link, in_use(link)))[0]
            return await self.codex.check_or_bring(link)

    def in_use(self, link: Link) -> MachineSpec:
        """The machine as the link reaches it (:func:`~bridge.shell.link_record.in_use`)."""
        return in_use(link)

    # -- a session's own container (sandbox machines) ----------------------------------

    def _session_link(self, name: str, folders: tuple[str, ...]) -> Link | None:
        """The link of a session's own container (``MACHINE@THREAD``), made now."""
        machine, _, thread = name.partition(spec_of.SESSION_MARK)
        base = self.links.get(machine)
        if not thread or base is None or base.spec.scheme != spec_of.SANDBOX:
            return None
        container = spec_of.sandbox_container(base.spec, thread)
        link = Link(spec_of.sandbox_box(base.spec, name, container), f"{base.url}/{thread}", None)
        link.box = Box(base.spec, folders)
        self.links[name] = link
        return link

    def release(self, name: str) -> None:
        """The session of ``name`` (``MACHINE@THREAD``) is closed or deleted: its container
        goes."""
        link = self.links.get(name)
        if link is None or link.box is None:
            return
        del self.links[name]
        if self._nursery is not None:
            self._nursery.start_soon(remove_box, link)

    async def ready_spec(self, spec: MachineSpec) -> MachineSpec:
        """``spec`` as the link reaches it, the Codex brought first if it must be (for a
        connection of the bridge's own: a rewind's); :class:`MachineError` says why not."""
        link = self.links.get(spec.name)
        if link is None or link.ready:
            return self.in_use(link) if link is not None else spec
        why = await self.check(link)
        if why is not None:
            raise spec_of.MachineError(why)
        return self.in_use(link)

    async def _check_now(self, link: Link) -> None:
        link.checking = True
        try:
            self._set(link, "connecting")
            # While the daemon brings Codex into the container, a check here could copy it
            # at the same time: the daemon's word is the answer.
            daemon_brings = self._daemon_brings(link)
            why = None if daemon_brings else await self.check(link)
            if why is None:
                await self._codex_back(link)
                if daemon_brings and link.heard and link.heard[0] == "down":
                    why = link.heard[1]
        finally:
            link.checking = False
        if why is None:
            self._set(link, "connected")
        else:
            self._down(link, why)

    async def _codex_back(self, link: Link) -> None:
        """The machine answers; if Codex's last connection to it failed, Codex may be in its
        pause before the next (see :data:`CODEX_RETRY_SECONDS`): until Codex's connection
        reached it, or the pause is over. An editor attached to the daemon knows neither
        but from the daemon's word (``down`` or ``connecting`` until then): it waits for
        that word to change, as long at most."""
        if not link.here:
            if self._published is not None:
                await self._daemon_connects(link)
            return
        if link.codex_on:
            return
        if link.codex_coming:
            # One of Codex's connections is on its way (a copy of Codex held it): until it
            # is there, as long as a check may take.
            link.codex_back = trio.Event()
            with trio.move_on_after(CHECK_SECONDS):
                await link.codex_back.wait()
            return
        if link.codex_failed is None:
            return
        link.codex_back = trio.Event()
        with trio.move_on_at(link.codex_failed + CODEX_RETRY_SECONDS):
            await link.codex_back.wait()

    def _daemon_brings(self, link: Link) -> bool:
        """Whether the daemon's link is at work on a machine whose Codex the bridge brings
        (this editor's check leaves the container to it and follows its word)."""
        if self._published is None or not link.prepared or link.here:
            return False
        return self._published().get(link.spec.name, ("", ""))[0] == "connecting"

    async def _daemon_connects(self, link: Link) -> None:
        """Until the daemon's word on ``link`` is neither ``down`` nor ``connecting``: a
        ``down`` for Codex's pause at most, a ``connecting`` (its link checking, or bringing
        Codex into a container) as long as that may take."""
        assert self._published is not None
        down_until = trio.current_time() + CODEX_RETRY_SECONDS
        with trio.move_on_after(CHECK_SECONDS + UP_SECONDS + COPY_SECONDS):
            while True:
                word = self._published().get(link.spec.name, ("", ""))
                link.heard = word
                if word[0] not in ("down", "connecting"):
                    return
                if word[0] == "down" and trio.current_time() >= down_until:
                    return
                await trio.sleep(0.1)

    async def _bring_back(self, link: Link) -> None:
        """A link dropped: check it again and again, waiting longer each time, until it
        works; a prompt that wants it meanwhile has it checked at once."""
        if link.bringing_back:
            return
        link.bringing_back = True
        try:
            for attempt in range(10_000):
                delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
                link.wanted = trio.Event()
                with trio.move_on_after(delay):
                    await link.wanted.wait()
                link.checking = True
                try:
                    why = await self.check(link)
                    if (
                        why is None
                        and not link.codex_on
                        and (link.codex_failed is not None or link.codex_coming)
                    ):
                        self._set(link, "connecting")
                        await self._codex_back(link)
                finally:
                    link.checking = False
                if why is None:
                    self._set(link, "connected")
                    return
                self._down(link, why)
        finally:
            link.bringing_back = False

    async def _relay(self, link: Link, connection: ServerConnection) -> None:
        """One of Codex's connections to ``link``: an exec-server over ssh (or in a
        container, or through a command), line by frame."""
        spec = link.spec
        if not link.ready:
            # Codex connected before a check brought its Codex there. Held through a copy,
            # Codex would give up on this connection (after some 10 s) and pause before
            # the next; closed now, it comes back in a moment, and the check (the link
            # connecting meanwhile: the daemon's attached editors wait on that word) says
            # connected once one of its connections is there.
            link.codex_failed = trio.current_time()
            self._check_soon(link)
            await connection.aclose(1013, "the machine is being prepared")
            return
        link.codex_coming += 1
        argv = spec_of.exec_server_argv(self.in_use(link), self.ssh)
        try:
            process = await trio.lowlevel.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            link.codex_coming -= 1
            self._dropped(link, could_not_run(argv, exc))
            await connection.aclose(1011, f"{argv[0]} could not run")
            return
        assert process.stdin and process.stdout and process.stderr
        stdin = process.stdin
        stderr = StderrTail()
        lines = Lines(process.stdout)
        ended_by_codex = False
        reached = False

        def reach() -> None:
            nonlocal reached
            reached = True
            link.codex_coming -= 1
            link.codex_on += 1
            link.codex_failed = None
            link.codex_back.set()
            self._set(link, "connected")

        link.relays += 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stderr.collect, process.stderr)
                if spec_of.version_first(spec):
                    first: bytes | None = None
                    with trio.move_on_after(CHECK_SECONDS) as waited:
                        first = await lines.next()
                    if waited.cancelled_caught:
                        self._dropped(
                            link, f"no answer from {spec.where()} within {CHECK_SECONDS:.0f} s"
                        )
                        nursery.cancel_scope.cancel()
                        return
                    if first is None:  # ssh ended before the remote Codex said a word
                        await process.wait()
                        await stderr.finished()
                        self._dropped(
                            link, spec_of.explain_failure(spec, process.returncode, stderr.text())
                        )
                        nursery.cancel_scope.cancel()
                        return
                    mismatch = await self.codex.version_mismatch(
                        link, first.decode(errors="replace")
                    )
                    if mismatch is not None:
                        self._dropped(link, mismatch, bring_back=False)
                        nursery.cancel_scope.cancel()
                        return
                    reach()

                async def to_machine() -> None:
                    nonlocal ended_by_codex
                    try:
                        async for message in connection:
                            data = message.encode() if isinstance(message, str) else message
                            await stdin.send_all(data + b"\n")
                    except ConnectionClosed:
                        pass
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return  # the remote end went: from_machine says why
                    ended_by_codex = True
                    # Codex is done with it: the remote end finishes, or is stopped.
                    with trio.move_on_after(CLOSE_SECONDS):
                        await stdin.aclose()
                        await process.wait()
                    nursery.cancel_scope.cancel()

                async def from_machine() -> None:
                    while (line := await lines.next()) is not None:
                        if not reached:  # the exec-server's first word: it runs there
                            reach()
                        try:
                            await connection.send(line.decode(errors="replace"))
                        except ConnectionClosed:
                            return
                    await process.wait()
                    await stderr.finished()
                    if not ended_by_codex:
                        self._dropped(
                            link, spec_of.explain_failure(spec, process.returncode, stderr.text())
                        )
                    nursery.cancel_scope.cancel()

                nursery.start_soon(to_machine)
                nursery.start_soon(from_machine)
        finally:
            link.relays -= 1
            if reached:
                link.codex_on -= 1
            else:
                link.codex_coming -= 1
            if process.returncode is None:
                process.kill()
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_SECONDS):
                await process.wait()
                await connection.aclose()

    def _down(self, link: Link, why: str) -> None:
        """The link is down: told even when it already was (a prompt waits on the answer)."""
        again = (link.state, link.reason) == ("down", why)
        link.state, link.reason = "down", why
        log.log(
            logging.DEBUG if again else logging.WARNING,
            "machine %s is down: %s",
            link.spec.name,
            why,
        )
        self.on_change(link.spec.name, "down", why)

    def _dropped(self, link: Link, why: str, *, bring_back: bool = True) -> None:
        """One of Codex's connections failed or was lost: why."""
        link.tried_down = link.codex_failed = trio.current_time()
        self._down(link, why)
        if bring_back and self._nursery is not None:
            self._nursery.start_soon(self._bring_back, link)


def _read_token(spec: MachineSpec) -> str:
    assert spec.token_file is not None
    refused = spec_of.token_refusal(spec.name, spec.url)
    if refused is not None:  # Codex would be handed the token for that URL
        raise spec_of.MachineError(refused)
    try:
        token = Path(spec.token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise spec_of.MachineError(
            f"machine {spec.name}: cannot read its token file {spec.token_file}: "
            f"{exc.strerror or exc}"
        ) from None
    if not token:
        raise spec_of.MachineError(
            f"machine {spec.name}: its token file {spec.token_file} is empty"
        )
    return token


async def _check_tcp(spec: MachineSpec) -> str | None:
    port = spec.port or (443 if spec.scheme == "wss" else 80)
    try:
        with trio.fail_after(10):
            stream = await trio.open_tcp_stream(spec.host, port)
        await stream.aclose()
    except trio.TooSlowError:
        return f"no answer from {spec.host}:{port} within 10 s"
    except OSError as exc:
        return f"cannot reach {spec.host}:{port}: {exc.strerror or exc}"
    return None

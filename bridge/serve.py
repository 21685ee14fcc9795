"""The ``serve`` command put together: pick a Codex (the daemon's, Codex's own daemon's,
or one of its own), build the engine, run the bridge on stdio.

It stands above both :mod:`bridge.shell` (the trio layer it runs on) and
:mod:`bridge.daemon` (whose runtime directory it reads to attach), so neither
of those two needs the other's way of starting.

Its start is ordered for the editor's wait (see :func:`serve_stdio`): which Codex, then
Codex started (when it is one of its own), then the engine built and ``initialize``
answered (:mod:`bridge.shell.early`), and only then trio and the shell."""

from __future__ import annotations

import copy
import gc
import logging
import os
import sys
import time
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .codex_choice import CodexChoice, ServeOptions, choose_codex
from .daemon.runtime import DaemonInfo, RuntimeDirError, codex_home, running_daemon
from .profiles import Profile, Profiles, find_profiles, load_profile
from .shell.codex_process import (
    EXIT_CODEX_UNAVAILABLE,
    CodexProcess,
    CodexUnavailable,
    codex_launch,
    find_codex,
    start_codex,
)

if TYPE_CHECKING:
    from .engine import Engine
    from .shell.codex_transport import CodexConnection
    from .shell.early import Early
    from .shell.effects import Tap

# Imported where they are first needed, not here: an editor waits for ``initialize``'s
# answer, and Codex is started before the engine is imported, and the engine answers before
# trio is (see bridge.shell.early).

log = logging.getLogger(__name__)


def read_profiles(
    options: ServeOptions, choice: CodexChoice, env: Mapping[str, str] | None = None
) -> Profiles:
    """The profiles of the editor's ``CODEX_HOME``, the one named in force: ``--profile``,
    else the daemon's when ``serve`` attaches to it. Raises ``ProfileError`` (naming the
    file looked for) when the one named cannot be used."""
    env = os.environ if env is None else env
    home = Path(codex_home(env))
    named, source = options.profile, "--profile"
    if named is None and choice.daemon is not None:
        try:
            info = running_daemon(choice.daemon)
        except RuntimeDirError:
            info = None  # untrusted since chosen: attaching will fail, and say why
        if info is not None and info.profile:
            named, source = info.profile, f"the daemon's --profile (pid {info.pid})"
    found, failed = find_profiles(home)
    warnings = [f"{exc}; not offered" for exc in failed]
    in_force: Profile | None = None
    if named is not None:
        in_force = next((p for p in found if p.name == named), None) or load_profile(home, named)
        unsent = in_force.unsent()
        if unsent:
            warnings.append(
                f"profile {named!r} sets {', '.join(unsent)}, which Codex reads once, when "
                "it starts: no thread's config changes it (set it in config.toml or with -c)"
            )
    return Profiles(
        profile=named,
        path=in_force.path if in_force is not None else None,
        source=source if named is not None else "",
        configs={p.name: p.config(options.parsed_overrides) for p in found},
        warnings=tuple(warnings),
    )


def open_codex(
    options: ServeOptions,
    daemon: Path | None = None,
    url: str | None = None,
    *,
    started: CodexProcess | None = None,
) -> AbstractAsyncContextManager[CodexConnection]:
    """The Codex connection the options ask for (raises ``CodexUnavailable``).

    With ``daemon``, the Codex its ``daemon.json`` names, read anew each time: a
    reconnection follows the daemon's Codex wherever it restarted; its token is the
    directory's own ``token``, both checked (:mod:`bridge.daemon.runtime`). With ``url``,
    Codex's own daemon (its socket stays where it is when it restarts). ``started``: the
    Codex of its own already started, to adopt (``serve``'s early start).
    """
    from .shell.codex_transport import connect_codex, spawn_codex

    if options.codex_url:
        return connect_codex(options.codex_url, token_file=options.codex_token_file)
    if url is not None:
        return connect_codex(url)
    if daemon is not None:
        from .daemon.runtime import read_token

        try:
            info = running_daemon(daemon)
            if info is None or info.state != "running" or not info.url:
                why = "no daemon runs there" if info is None else f"the daemon is {info.state}"
                raise CodexUnavailable(f"cannot attach to the daemon of {daemon}: {why}")
            # ``tokenFile`` says only whether there is a token (Codex's own daemon's socket
            # takes none): never where to read it.
            token = read_token(daemon) if info.tokenFile else None
        except RuntimeDirError as exc:
            raise CodexUnavailable(f"cannot attach to the daemon of {daemon}: {exc}") from exc
        return connect_codex(info.url, token=token)
    binary = find_codex(options.codex_bin)
    return spawn_codex(binary, config_overrides=options.config_overrides, started=started)


def thread_config(options: ServeOptions, *, attached: bool | None = None) -> dict[str, Any] | None:
    """The config the engine sends with each thread/start.

    A spawned Codex gets the overrides on its command line; an attached one
    (``--codex-url``, a daemon) only through each thread/start. Each caller
    gets its own copy, as it did when the overrides were parsed per call.
    """
    if attached is None:
        attached = bool(options.codex_url)
    return copy.deepcopy(options.parsed_overrides) if attached else None


def make_engine(
    options: ServeOptions,
    tap: Tap | None = None,
    *,
    daemon: Path | None = None,
    shared: bool = False,
    machines: Any = (),
    profiles: Profiles | None = None,
) -> Engine:
    from .acp.auth import API_KEY_VARIABLES
    from .engine import Engine

    # Codex's app-server reads no API key from its environment: the bridge hands it
    # over when the client picks that auth method (see bridge/engine/auth.py).
    api_key = next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)

    def is_directory(path: str) -> bool:
        # The engine asks; the file system answers here. A recording keeps each
        # "no", so that its replay, on a machine without the path, answers the same.
        found = os.path.isdir(path)
        if not found and tap is not None:
            tap.event("missing_directory", path)
        return found

    def real_path(path: str) -> str:
        # Where a path really leads (its symlinks resolved), for /rewind to keep its writes
        # in the session's folders. This file system is Codex's own unless --codex-url names
        # a Codex elsewhere; a path that is not here comes back as written. A recording keeps
        # each answer that differs, for its replay.
        try:
            found = os.path.realpath(path)
        except (OSError, ValueError):
            found = path
        if found != path and tap is not None:
            tap.event("real_path", path, data=found)
        return found

    # ``shared``: Codex's own daemon, which, like the bridge's, outlives this editor.
    shared = shared or daemon is not None
    attached = bool(options.codex_url) or shared
    profiles = profiles or Profiles()
    return Engine(
        thread_config=thread_config(options, attached=attached),
        profiles=profiles.configs,
        profile=profiles.profile,
        api_key=api_key,
        is_directory=is_directory,
        real_path=real_path,
        # Beside a daemon's Codex, what waits on the user outlives this editor.
        detachable=shared,
        paged_store=True,
        codex_shared=attached,
        machines=machines,
        stored_machine=_stored_machine(tap) if machines else None,
    )


def _stored_machine(tap: Tap | None) -> Any:
    """The machine stored for a thread, each answer kept in a recording (its replay, on a
    machine without the store, answers the same)."""
    from .shell.machine_store import ThreadMachines

    store = ThreadMachines()

    def stored(thread_id: str) -> str | None:
        found = store.get(thread_id)
        if tap is not None and found is not None:
            tap.event("stored_machine", thread_id, machine=found)
        return found

    return stored


def make_links(options: ServeOptions, choice: CodexChoice) -> Any:
    """The links to the machines the user named (``MachineLinks``), ``None`` without any.
    Through the bridge's daemon, the daemon runs them and its Codex has them registered:
    the daemon's machines are offered, with links here that only check them (with this
    process's own ssh command: nothing ``daemon.json`` names is run)."""
    if choice.daemon is not None:
        return _daemon_machines(options, choice.daemon)
    if not options.machines:
        return None
    # Imported only now: the links bring websockets (and asyncio under it), a tenth of a
    # second of CPU at every start of a session that names no machine.
    from .shell.machine_link import MachineLinks

    return MachineLinks(
        options.machines, ssh=options.ssh_command or ["ssh"], codex_program=_own_codex(options)
    )


def _own_codex(options: ServeOptions) -> str | None:
    try:
        return codex_launch(find_codex(options.codex_bin), os.environ).program
    except CodexUnavailable:
        return None


def _daemon_machines(options: ServeOptions, directory: Path) -> Any:
    from . import machines as machine_specs
    from .daemon.runtime import read_info

    def read_published() -> DaemonInfo | None:
        try:
            return read_info(directory)
        except RuntimeDirError:
            return None  # untrusted since chosen: its word is not taken

    info = read_published()
    published = info.machines if info is not None else []
    theirs = {m.name: m.url for m in published}
    # A container per session is this process's own to run: the daemon offers none.
    boxed = [m for m in options.machines if m.scheme == machine_specs.SANDBOX]
    ignored = [m.name for m in options.machines if theirs.get(m.name) != m.url and m not in boxed]
    if ignored:
        log.warning(
            "machines are the daemon's: %s ignored here (give them to `daemon`, or use "
            "the machines file both read)",
            ", ".join(ignored),
        )
    if (not published and not boxed) or info is None:
        return None
    from .shell.machine_link import MachineLinks

    specs = [m for m in boxed if m.name not in theirs]
    for machine in published:
        if machine.url.startswith((f"{machine_specs.COMMAND}:", "devcontainer:")):
            # A command machine's command is run here only as this process's own
            # configuration names it (the machines file both read): never from a file. So
            # is a dev container's CLI, which runs what its folder's configuration says.
            mine = next(
                (m for m in options.machines if m.name == machine.name and m.url == machine.url),
                None,
            )
            if mine is None:
                log.warning(
                    "the daemon's machine %s runs a command this bridge is not given: name "
                    "it in the machines file both read",
                    machine.name,
                )
                continue
            specs.append(replace(mine, description=machine.description))
            continue
        try:
            spec = machine_specs.parse_url(machine.name, machine.url)
        except machine_specs.MachineError as exc:
            log.warning("the daemon's machine %s: %s", machine.name, exc)
            continue
        # A ws:// machine's token is in no file the daemon publishes: this bridge's own
        # (the same machine, named here too) lets it call that exec-server itself.
        own = next((m for m in options.machines if m.name == spec.name and m.url == spec.url), None)
        token = own.token_file if own is not None else None
        specs.append(replace(spec, description=machine.description, token_file=token))

    def states() -> dict[str, tuple[str, str]]:
        now = read_published()
        return {m.name: (m.state, m.reason) for m in now.machines} if now is not None else {}

    return MachineLinks(
        specs,
        # This process's own ssh (--ssh-command, $CODEX_ACP_BRIDGE_SSH_COMMAND, ssh), not the
        # daemon's: a command is never taken from a file.
        ssh=options.ssh_command or machine_specs.ssh_command(None),
        # The version the daemon's Codex said it is, compared with the machine's; no
        # program of the daemon's is run to learn it.
        codex_version=info.codexVersion,
        # This process's own Codex: what it brings into a container (of the daemon's
        # version only) when its check finds none there before the daemon's link did.
        codex_program=_own_codex(options),
        relay=False,
        published=states,
    )


async def serve(
    early: Early,
    options: ServeOptions,
    choice: CodexChoice,
    engine: Engine,
    tap: Tap | None = None,
    parent: int | None = None,
    links: Any = None,
) -> None:
    """The shell, from where :mod:`bridge.shell.early` left off: the client's stream, the
    Codex started (adopted at the first connection, started anew at a restart). ``parent``:
    the pid of the editor that started this bridge (default: the parent now)."""
    import trio

    from .shell.run_bridge import run_bridge
    from .shell.stdio import open_stdio_stream

    client = open_stdio_stream(fds=(early.client_in, early.client_out), received=early.received)
    started = early.codex

    def connect() -> AbstractAsyncContextManager[CodexConnection]:
        nonlocal started
        adopt, started = started, None
        return open_codex(options, choice.daemon, choice.url, started=adopt)

    # What exists now (the modules, the engine) lives as long as this process: out of the
    # collector's sight, a full collection no longer walks all of it (15 ms here), which
    # otherwise fell at random on a client's request.
    gc.freeze()
    gc.enable()
    from .shell.census import keep_census

    async with trio.open_nursery() as nursery:
        watched = os.getppid() if parent is None else parent
        nursery.start_soon(_watch_parent, watched, nursery.cancel_scope)
        nursery.start_soon(keep_census, engine.census)
        await run_bridge(
            client,
            connect,
            engine,
            restart=options.restart,
            tap=tap,
            handshake_sent=early.handshake_sent,
            machines=links,
        )
        nursery.cancel_scope.cancel()


#: How often the bridge checks that the editor that started it is still there.
PARENT_POLL_SECONDS = 0.25


async def _watch_parent(parent: int, scope: Any) -> None:
    """End the bridge when the process that started it (the editor) is gone: its
    children are handed to another parent then. A bridge is never left behind.
    ``scope``: the ``trio.CancelScope`` to cancel."""
    import trio

    while os.getppid() == parent:  # noqa: ASYNC110 (no event says a parent died: poll)
        await trio.sleep(PARENT_POLL_SECONDS)
    log.warning("the process that started this bridge (%d) is gone; stopping", parent)
    scope.cancel()


def serve_stdio(options: ServeOptions, *, record_to: str | None = None) -> int:
    """Run ``serve`` on this process's stdio; returns the exit status.

    0: the client closed the connection. :data:`EXIT_CODEX_UNAVAILABLE`: Codex could not
    be started or reached, or died before it was ready. 2: the profile named cannot be
    used (:mod:`bridge.profiles`), or a file named cannot be written safely. One line on
    stderr says why (docs/operations.md, "Exit statuses").
    With ``record_to``, every message the engine sees is also written there
    (see :mod:`bridge.recording`).
    """
    # The editor that started this bridge, read before Codex is started: an editor that
    # dies once it sees Codex running is then noticed (see _watch_parent).
    parent = os.getppid()
    choice = choose_codex(options)
    if choice.refused:
        report(f"{choice.refused} (going on without the daemon)", logging.WARNING)
    if choice.daemon_runs:
        report(choice.says)
    else:
        log.info("%s", choice.says)
    try:
        profiles = read_profiles(options, choice)
        links = make_links(options, choice)
    except ValueError as exc:  # a profile that cannot be used, a token file that cannot be read
        report_fatal(str(exc))
        return 2
    for warning in profiles.warnings:
        log.warning("%s", warning)
    if profiles.profile is not None:
        log.info("profile: %s", profiles.says())
    with ExitStack() as stack:
        recorder = None
        if record_to is not None:
            from .recording.recorder import Recorder
            from .shell.private_file import RefusedFile, open_private

            try:
                out = stack.enter_context(os.fdopen(open_private(record_to, append=False), "wb"))
            except RefusedFile as exc:
                report_fatal(f"--out: {exc}")
                return 2
            # Read from the options, not from an engine's attributes: the replay
            # builds its engine from this header, so both follow the same options.
            shared = choice.daemon is not None or choice.url is not None
            engine_config = {
                "threadConfig": thread_config(options, attached=options.attached(choice)),
                "detachable": shared,
                "codexShared": options.attached(choice),
                # Lists and histories read in pages (recordings from before say nothing).
                "pagedStore": True,
                # Each profile's thread config, and the one in force at first.
                "profiles": profiles.configs,
                "profile": profiles.profile,
                "machines": [
                    {"name": o.name, "path": o.path, "description": o.description}
                    | ({"url": o.registration.url} if o.registration else {})
                    | ({"perSession": True} if o.per_session else {})
                    for o in (links.offers() if links is not None else [])
                ],
            }
            recorder = Recorder(
                out,
                clock=time.monotonic,
                transport="websocket" if options.codex_url else "stdio",
                engine_config={k: v for k, v in engine_config.items() if v},
            )
            stack.callback(recorder.close)
        return _serve_stdio(options, choice, recorder, parent, links, profiles)


def _serve_stdio(
    options: ServeOptions,
    choice: CodexChoice,
    tap: Tap | None,
    parent: int,
    links: Any = None,
    profiles: Profiles | None = None,
) -> int:
    # Codex first, when it is one of its own: it starts while the engine is imported. One
    # that cannot start is tried again by the shell, which says why.
    # No collection while the modules load (some 35 of them, a few ms, each walking what is
    # loaded so far): serve freezes what exists once the shell runs, then collects again.
    gc.disable()
    codex = None
    if not options.attached(choice):
        try:
            codex = start_codex(
                find_codex(options.codex_bin), config_overrides=options.config_overrides
            )
        except CodexUnavailable:
            codex = None
    status = 0
    try:
        engine = make_engine(
            options,
            tap,
            daemon=choice.daemon,
            shared=choice.url is not None,
            machines=links.offers() if links is not None else (),
            profiles=profiles,
        )
        from .shell.early import begin

        early = begin(engine, codex, tap, parent=parent)
        import trio

        trio.run(serve, early, options, choice, engine, tap, parent, links)
    except* CodexUnavailable as group:
        report_fatal(str(_first_leaf(group)))
        status = EXIT_CODEX_UNAVAILABLE
    except* KeyboardInterrupt:
        status = 130
    return status


def report_fatal(message: str) -> None:
    """One line a person can act on, on stderr even when logs go to a file."""
    report(message, logging.ERROR)


def report(message: str, level: int = logging.INFO) -> None:
    """One line on stderr whatever the log level, also logged when logs go to a file."""
    print(f"codex-acp-bridge: {message}", file=sys.stderr, flush=True)
    if any(isinstance(h, logging.FileHandler) for h in logging.getLogger().handlers):
        log.log(level, "%s", message)


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error

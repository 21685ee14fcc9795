"""The ``codex-acp-bridge`` command.

``serve`` is the default subcommand: editors launch the bare command and talk
ACP on its stdin/stdout. Everything the bridge logs goes to stderr or
``--log-file``, never to stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click

from . import __version__

if TYPE_CHECKING:
    pass


class _DefaultToServe(click.Group):
    """A group that runs ``serve`` when no subcommand is named: nothing, or options alone
    (what an editor runs). A first word that is not an option names a command, and one
    that names none is click's error, which says the command it likely meant."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0].startswith("-") and args[0] not in ("--help", "-h", "--version")):
            args = ["serve", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToServe, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="codex-acp-bridge")
def main() -> None:
    """Bridge OpenAI Codex's app-server to the Agent Client Protocol (ACP).

    Without a subcommand, runs `serve`: ACP on stdin/stdout, for an editor.
    """


def _stacked(*options: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Several click options as one decorator, in the order written (as stacked decorators)."""

    def apply(f: Any) -> Any:
        for option in reversed(options):
            f = option(f)
        return f

    return apply


_logging_options = _stacked(
    click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
        default="warning",
        show_default=True,
        help="How much to log.",
    ),
    click.option(
        "--log-file",
        type=click.Path(dir_okay=False),
        help="Write logs to this file instead of stderr (created 0600; appended to when it is "
        "a file of yours; a symbolic link is refused).",
    ),
)

_runtime_dir_option = click.option(
    "--runtime-dir",
    type=click.Path(file_okay=False),
    help="The daemon's runtime directory (default: $CODEX_ACP_BRIDGE_RUNTIME_DIR, "
    "else $XDG_RUNTIME_DIR/codex-acp-bridge, else a per-user temporary directory).",
)

_config_option = click.option(
    "-c",
    "--config",
    "config_overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Codex config override, as `codex -c` takes it (repeatable).",
)

_profile_option = click.option(
    "--profile",
    metavar="NAME",
    envvar="CODEX_ACP_BRIDGE_PROFILE",
    help="Codex config profile: $CODEX_HOME/NAME.config.toml over config.toml, -c over "
    "both, as `codex --profile` (default: $CODEX_ACP_BRIDGE_PROFILE). A serve's sessions may "
    "pick another (their `profile` option); the daemon's is for the editors that attach and "
    "name none (Codex's app-server takes none: each serve layers it over its threads).",
)

_codex_bin_option = click.option(
    "--codex-bin",
    metavar="PATH",
    help="The Codex binary (default: $CODEX_ACP_BRIDGE_CODEX_BIN, `codex` on PATH, then the "
    "project's pinned copy).",
)

_codex_options = _stacked(
    _codex_bin_option,
    click.option(
        "--codex-url",
        metavar="ws://HOST:PORT|unix:///PATH",
        help="Attach to a running `codex app-server --listen ws://...`, or to Codex's daemon "
        "socket (unix://$CODEX_HOME/app-server-control/app-server-control.sock), instead of "
        "spawning one.",
    ),
    click.option(
        "--codex-token-file",
        type=click.Path(dir_okay=False, exists=True),
        help="Capability token for --codex-url (app-server --ws-auth capability-token).",
    ),
    _config_option,
)


_no_daemon_option = click.option(
    "--no-daemon", is_flag=True, help="Spawn a Codex of its own even when a daemon runs."
)

#: What chooses the Codex a serve uses (``serve``, and ``record``, which serves).
_codex_choice_options = _stacked(
    _codex_options, _profile_option, _runtime_dir_option, _no_daemon_option
)


def _machine_options(command: Any) -> Any:
    """``--machine``, ``--machine-token-file`` and ``--ssh-command`` (serve, daemon, doctor)."""
    for option in reversed(
        (
            click.option(
                "--machine",
                "machines",
                multiple=True,
                metavar="NAME=URL",
                help="A machine sessions may run on: ssh://[USER@]HOST[:PORT][/PATH] (its "
                "codex started over your ssh; ?codex=PATH names the remote codex) or "
                "ws://HOST:PORT for an exec-server that runs already. Adds to the machines "
                "file ($XDG_CONFIG_HOME/codex-acp-bridge/machines.toml).",
            ),
            click.option(
                "--machine-token-file",
                "machine_token_files",
                multiple=True,
                metavar="NAME=FILE",
                help="The capability token of a ws:// machine's exec-server.",
            ),
            click.option(
                "--ssh-command",
                metavar="COMMAND",
                help="How to run ssh, as git's GIT_SSH_COMMAND (default: "
                "$CODEX_ACP_BRIDGE_SSH_COMMAND, else ssh).",
            ),
        )
    ):
        command = option(command)
    return command


def gather_machines(
    machines: tuple[str, ...], token_files: tuple[str, ...], ssh_command: str | None
) -> tuple[list[Any], list[str]]:
    """The machines named (file and flags) and the ssh command, or a usage error."""
    from . import machines as machine_specs

    if not (machines or token_files or ssh_command or machine_specs.machines_file().exists()):
        return [], []  # the common start: nothing named

    try:
        return (
            machine_specs.gather(machines, token_files),
            machine_specs.ssh_command(ssh_command),
        )
    except machine_specs.MachineError as exc:
        raise click.BadParameter(str(exc), param_hint="--machine") from None


_device_auth_option = click.option(
    "--device-auth/--browser",
    default=None,
    help="Sign in with a device code, or in a browser (default: a device code over SSH "
    "or without a display).",
)


def setup_logging(level: str, log_file: str | None) -> None:
    """Logs to stderr or ``log_file`` (:mod:`bridge.logs`); a log file that cannot be
    private (a symbolic link, another user's) ends the command, status 2."""
    from .logs import setup_logging as start
    from .shell.private_file import RefusedFile

    try:
        start(level, log_file)
    except RefusedFile as exc:
        click.echo(f"codex-acp-bridge {_command_name()}: --log-file: {exc}", err=True)
        sys.exit(2)


def _command_name() -> str:
    context = click.get_current_context(silent=True)
    return (context.info_name or "") if context is not None else ""


def parse_config_overrides(overrides: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``key=value`` pairs, the value read as TOML when it parses (as Codex does)."""
    if not overrides:
        return {}
    import tomllib  # here: most starts have no overrides, and tomllib costs ~10 ms to import

    parsed: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="-c")
        try:
            parsed[key.strip()] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            parsed[key.strip()] = value
    return parsed


def _serve_stdio(
    *,
    codex_bin: str | None,
    codex_url: str | None,
    codex_token_file: str | None,
    config_overrides: tuple[str, ...],
    profile: str | None,
    no_daemon: bool,
    runtime_dir: str | None,
    log_level: str,
    log_file: str | None,
    machines: tuple[str, ...],
    machine_token_files: tuple[str, ...],
    ssh_command: str | None,
    record_to: str | None = None,
) -> NoReturn:
    """``serve`` (and ``record``, which serves too) on stdio, with the options that choose
    the Codex (:data:`_codex_choice_options`, :func:`_machine_options`,
    :data:`_logging_options`) as click hands them over; exits with its status."""
    from .codex_choice import ServeOptions
    from .serve import serve_stdio
    from .token_urls import codex_url_refusal

    setup_logging(log_level, log_file)
    specs, ssh = gather_machines(machines, machine_token_files, ssh_command)
    if codex_url and codex_token_file:
        refused = codex_url_refusal(codex_url)
        if refused is not None:
            raise click.BadParameter(refused, param_hint="--codex-url")

    options = ServeOptions(
        codex_bin=codex_bin,
        codex_url=codex_url,
        codex_token_file=codex_token_file,
        config_overrides=list(config_overrides),
        # parsed here, before starting, so malformed ones are rejected first
        parsed_overrides=parse_config_overrides(config_overrides),
        runtime_dir=runtime_dir,
        use_daemon=not no_daemon,
        machines=tuple(specs),
        ssh_command=ssh,
        profile=profile or None,
    )
    sys.exit(serve_stdio(options, record_to=record_to))


@main.command()
@_codex_choice_options
@click.option(
    "--login",
    is_flag=True,
    help="Sign in to Codex in this terminal instead of serving (ACP's terminal sign-in).",
)
@_device_auth_option
@_machine_options
@_logging_options
def serve(login: bool, device_auth: bool | None, **choice: Any) -> None:
    """Serve ACP on stdin/stdout (what an editor launches).

    Attaches to the daemon of the runtime directory when one runs, else spawns
    a Codex of its own; --codex-url attaches where it says. With --login, signs
    in instead (the command an editor runs in a terminal for ACP's terminal
    sign-in: its usual command plus --login).
    """
    if login:
        from .shell.login import run_login

        sys.exit(run_login(choice["codex_bin"], device_auth))
    _serve_stdio(**choice)


@main.command()
@_codex_bin_option
@_device_auth_option
def login(codex_bin: str | None, device_auth: bool | None) -> None:
    """Sign in to Codex with ChatGPT, in this terminal (Codex's own `codex login`).

    On a machine reached over SSH, or without a display, Codex shows a device code
    to enter at chatgpt.com instead of opening a browser.
    """
    from .shell.login import run_login

    sys.exit(run_login(codex_bin, device_auth))


def _daemon_links(specs: list[Any], ssh: list[str], codex_bin: str) -> Any:
    """The daemon's links to its machines (bound now, before trio), ``None`` without any."""
    import logging
    import os

    from .machines import SANDBOX

    boxed = [spec.name for spec in specs if spec.scheme == SANDBOX]
    if boxed:
        # Each session's container is made by the editor's serve that runs the session,
        # as long as it runs: the daemon's sessions outlive their editors.
        logging.getLogger(__name__).info(
            "machines with a container per session are each editor's own, not the daemon's: %s",
            ", ".join(boxed),
        )
        specs = [spec for spec in specs if spec.scheme != SANDBOX]
    if not specs:
        return None

    from .shell.codex_transport import codex_launch
    from .shell.machine_link import MachineLinks

    program = codex_launch(codex_bin, os.environ).program
    return MachineLinks(specs, ssh=ssh or ["ssh"], codex_program=program)


@main.command()
@_codex_bin_option
@_config_option
@_profile_option
@click.option(
    "--page-listen",
    metavar="HOST:PORT",
    default="127.0.0.1:0",
    show_default=True,
    help="Where the live page listens (port 0: any free one; `status --url` says which). "
    "Loopback only, unless with --page-tls-cert.",
)
@click.option(
    "--page-tls-cert", metavar="FILE", help="Serve the page over TLS with this certificate."
)
@click.option("--page-tls-key", metavar="FILE", help="The TLS certificate's private key.")
@click.option(
    "--page-origin",
    "page_origins",
    multiple=True,
    metavar="URL",
    help="Also accept the page under this origin (a proxy of yours, e.g. https://box.example).",
)
@click.option("--no-page", is_flag=True, help="Serve no page.")
@_machine_options
@_runtime_dir_option
@_logging_options
def daemon(
    codex_bin: str | None,
    config_overrides: tuple[str, ...],
    profile: str | None,
    page_listen: str,
    page_tls_cert: str | None,
    page_tls_key: str | None,
    page_origins: tuple[str, ...],
    no_page: bool,
    machines: tuple[str, ...],
    machine_token_files: tuple[str, ...],
    ssh_command: str | None,
    runtime_dir: str | None,
    log_level: str,
    log_file: str | None,
) -> None:
    """Run one supervised Codex app-server for this user; editors' `serve` attach to it.

    Runs in the foreground (for systemd or launchd) until SIGTERM or SIGINT. It serves a
    live page of every thread, where a person answers approvals (`status --open`). The
    machines named run their links here, for every editor attached. Exits 2, with one
    line on stderr, when the runtime directory is not a private one of this user's.
    """
    import trio

    from .daemon.daemon import CrashLoop, run_daemon
    from .daemon.page import PageOptions, PageRefused
    from .daemon.runtime import DaemonRuns, RuntimeDirError, codex_home, hold_lock, prepare
    from .daemon.runtime import runtime_dir as resolve_runtime_dir
    from .profiles import load_profile
    from .shell.codex_transport import CodexUnavailable, find_codex

    setup_logging(log_level, log_file)
    parse_config_overrides(config_overrides)  # malformed ones are refused before anything starts
    host, _, port = page_listen.rpartition(":")
    if not host or not port.isdigit():
        raise click.BadParameter("HOST:PORT", param_hint="--page-listen")
    if bool(page_tls_cert) != bool(page_tls_key):
        raise click.BadParameter(
            "give both, or neither", param_hint="--page-tls-cert/--page-tls-key"
        )
    page = (
        None
        if no_page
        else PageOptions(host.strip("[]"), int(port), page_tls_cert, page_tls_key, page_origins)
    )
    specs, ssh = gather_machines(machines, machine_token_files, ssh_command)
    try:
        if profile:
            load_profile(codex_home(), profile)  # one that cannot be used is refused now
        directory = prepare(resolve_runtime_dir(runtime_dir))
        binary = find_codex(codex_bin)
        with hold_lock(directory):
            links = _daemon_links(specs, ssh, binary)
            try:
                trio.run(
                    lambda: run_daemon(
                        directory,
                        binary,
                        config_overrides=list(config_overrides),
                        page=page,
                        links=links,
                        profile=profile or "",
                    )
                )
            finally:
                if links is not None:
                    links.close()
    # ValueError: a token file, or a profile (ProfileError), that cannot be used.
    except (DaemonRuns, CodexUnavailable, CrashLoop, PageRefused, ValueError) as exc:
        click.echo(f"codex-acp-bridge daemon: {exc}", err=True)
        sys.exit(1)
    except RuntimeDirError as exc:  # not this user's alone: nothing of it is used
        click.echo(f"codex-acp-bridge daemon: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


@main.command()
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False),
    help="The recording to write (JSON Lines; see docs/recordings.md): created 0600, "
    "replacing a file of yours; a symbolic link is refused.",
)
@_codex_choice_options
@_machine_options
@_logging_options
def record(out: str, **choice: Any) -> None:
    """Serve ACP exactly like `serve`, and record the Codex traffic to --out.

    Secrets (tokens, API keys, auth headers) are redacted before they are written.
    """
    _serve_stdio(record_to=out, **choice)


@main.command()
@_runtime_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the daemon and every thread.")
@click.option("--watch", is_flag=True, help="Redraw whenever something changes (Ctrl-C ends).")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Every thread, however many (on a terminal, and with --watch, the tree fits the "
    "screen: what waits on you, what runs, then the most recent idle threads).",
)
@click.option(
    "--url", "show_url", is_flag=True, help="Print the live page's address (with its secret)."
)
@click.option("--open", "open_page", is_flag=True, help="Open the live page in the browser.")
@click.option(
    "--notify",
    is_flag=True,
    help="Open the page with its desktop notifications on: one when a thread starts waiting on "
    "you (with --url: that page's address).",
)
def status(runtime_dir: str | None, **options: bool) -> None:
    """Show what every agent of the daemon's Codex is doing: a tree of threads.

    `--open` shows it live in the browser instead (the daemon's page: answer approvals,
    cancel turns); `--url` prints that page's address, which holds its secret.
    Exits 1, with one line on stderr, when no daemon runs; 2 when the runtime directory
    is not a private one of this user's (nothing in it is read then).
    """
    from .daemon.runtime import RuntimeDirError
    from .daemon.runtime import runtime_dir as resolve_runtime_dir
    from .daemon.status import show

    directory = resolve_runtime_dir(runtime_dir)
    try:
        sys.exit(show(directory, **options))
    except RuntimeDirError as exc:
        click.echo(f"codex-acp-bridge status: {exc}", err=True)
        sys.exit(2)


@main.command()
@click.argument("recording", type=click.Path(dir_okay=False))
@click.option(
    "--check",
    "expected",
    type=click.Path(dir_okay=False),
    help="Compare with this expected transcript; differences are shown and fail the command.",
)
@click.option(
    "--update",
    is_flag=True,
    help="Rewrite the expected transcript (--check's, or RECORDING's .acp.jsonl twin).",
)
@click.option("--no-checker", is_flag=True, help="Skip the RFD invariants checker.")
def replay(recording: str, expected: str | None, update: bool, no_checker: bool) -> None:
    """Replay RECORDING through the engine and print the ACP transcript.

    No Codex, no network, no clock: the same engine as `serve`, fed the
    recorded messages. Exit status 1 with a message naming the line when the
    recording is broken or the transcript breaks an RFD rule; nothing is
    printed then, so a partial transcript is never taken for a whole one.
    """
    from .recording import RecordingError, read_recording
    from .recording import replay as run_replay

    if update and expected is None:
        if not recording.endswith(".codex.jsonl"):
            raise click.UsageError(
                "--update needs --check EXPECTED (or a RECORDING named NAME.codex.jsonl)"
            )
        expected = recording.removesuffix(".codex.jsonl") + ".acp.jsonl"
    try:
        transcript = run_replay(read_recording(recording), check=not no_checker).text()
    except RecordingError as exc:
        click.echo(f"codex-acp-bridge replay: {exc}", err=True)
        sys.exit(1)
    if update:
        assert expected is not None
        with open(expected, "w", encoding="utf-8") as f:
            f.write(transcript)
        click.echo(f"wrote {expected} ({transcript.count(chr(10))} messages)", err=True)
    elif expected is not None:
        try:
            with open(expected, encoding="utf-8") as f:
                want = f.read()
        except OSError as exc:
            click.echo(f"codex-acp-bridge replay: cannot read {expected}: {exc.strerror}", err=True)
            sys.exit(1)
        if want != transcript:
            import difflib

            diff = difflib.unified_diff(
                want.splitlines(keepends=True),
                transcript.splitlines(keepends=True),
                fromfile=expected,
                tofile=f"replay of {recording}",
            )
            sys.stdout.writelines(diff)
            click.echo(f"codex-acp-bridge replay: the transcript differs from {expected}", err=True)
            sys.exit(1)
    else:
        sys.stdout.write(transcript)


@main.command()
@click.option(
    "--prompt", default=None, help="The prompt to send (directives of the scripted model allowed)."
)
@_codex_bin_option
@_logging_options
def demo(prompt: str | None, codex_bin: str | None, log_level: str, log_file: str | None) -> None:
    """Run one conversation offline: scripted model, real Codex, the bridge, a client."""
    from .demo import run_demo

    setup_logging(log_level, log_file)
    sys.exit(run_demo(prompt=prompt, codex_bin=codex_bin))


@main.command()
@_codex_bin_option
@_profile_option
@_runtime_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: every check and the verdict.")
@_machine_options
def doctor(
    codex_bin: str | None,
    profile: str | None,
    runtime_dir: str | None,
    as_json: bool,
    machines: tuple[str, ...],
    machine_token_files: tuple[str, ...],
    ssh_command: str | None,
) -> None:
    """Check what the bridge needs: Codex, its sign-in, its config, the daemon, a handshake,
    and each machine named (reached over ssh, its Codex, its exec-server).

    A checklist on stdout (✓ fine, ! a warning, ✗ blocks use, with what to do);
    exit status 1 when anything blocks use, else 0.
    """
    from .doctor import run_doctor

    # A machine that cannot be used as written is a line of the checklist, not a usage
    # error: serve would refuse to start on it, and the rest is still worth saying.
    error = None
    try:
        specs, ssh = gather_machines(machines, machine_token_files, ssh_command)
    except click.BadParameter as exc:
        specs, ssh, error = [], [], exc.message
    sys.exit(
        run_doctor(
            codex_bin,
            runtime_dir,
            json_output=as_json,
            machines=specs,
            ssh=ssh,
            machines_error=error,
            profile=profile or None,
        )
    )


if __name__ == "__main__":  # pragma: no cover
    main()

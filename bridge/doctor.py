"""``codex-acp-bridge doctor``: what would stop the bridge, said before a bug is filed.

One checklist, in this order:

- **Codex binary**: the one ``serve`` would run (:func:`bridge.shell.codex_transport.find_codex`:
  ``--codex-bin``, the env var, PATH, the pinned copy) and its ``--version``, against the tested
  range (:mod:`bridge.codex.versions`): missing ✗, outside the range !;
- **Credentials**: what Codex's own ``account/read`` says (a ChatGPT sign-in, an API key, a
  provider that needs no OpenAI login), completed by what Codex cannot know: an API key in the
  bridge's environment (``serve`` hands it to Codex when the editor picks that method), the
  ``env_key`` a custom provider reads. When Codex cannot be asked, the files say it instead
  (``CODEX_HOME/auth.json``, ``config.toml``'s provider);
- **config.toml**: what ``serve`` will do with it. Codex 0.169 starts on a config it cannot
  load (a TOML syntax error, a value of the wrong type, an unknown provider): ``initialize`` and
  ``account/read`` answer, a ``configWarning`` says "Invalid configuration; using defaults.",
  but every ``thread/start``, so every ``session/new``, fails with "failed to load configuration:
  <where: what>". Doctor asks Codex's ``config/read`` (cheap, starts nothing); when that fails it
  tries the ``thread/start`` ``serve`` would send (ephemeral, in an empty temporary folder) and
  quotes Codex's answer, the one position Codex gives. Only when Codex cannot be asked does
  ``tomllib`` speak (its own position);
- **Daemon**: whether one runs on the runtime directory (the lock held, :mod:`bridge.daemon.runtime`),
  its state, and whether the directory is the user's own and private;
- **Codex used**: which Codex ``serve`` would use and why, as ``serve`` decides it
  (:func:`bridge.serve.choose_codex`): the bridge's daemon, Codex's own daemon, or one of
  its own;
- **initialize round trip**: ``codex app-server`` started as ``serve`` starts it, ``initialize``
  (with ``experimentalApi``, as the engine sends it) answered within a time limit, then
  ``account/read``; the time it took and Codex's ``userAgent``, and what Codex warned about
  meanwhile (a missing sandbox tool, ...). Codex is stopped with its process group, as
  ``serve`` stops it.

✓ is fine, ! a warning that does not block use, ✗ blocks use: the exit status is 1 when any
check is ✗, else 0, for the checklist and for ``--json`` alike.

STYLE: the findings are gathered first (:func:`gather`, the only part doing I/O, with trio),
then turned into checks by pure functions (one per check, :func:`checklist`), which the tests
feed made-up findings.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import trio
from msgspec import Raw

from . import __version__
from .acp.auth import API_KEY_VARIABLES
from .codex import palette as codex_palette
from .codex import types as codex_types
from .codex.versions import PINNED, drift_warning, parse, tested_range
from .daemon.runtime import DaemonInfo, daemon_running, read_info, runtime_dir
from .engine.core.hub import AGENT_NAME
from .jsonrpc import (
    IncomingError,
    IncomingNotification,
    IncomingRequest,
    IncomingResponse,
    Invalid,
    Peer,
)
from .jsonrpc.peer import ErrorObject
from .shell.codex_transport import (
    ENV_CODEX_BIN,
    CodexUnavailable,
    find_codex,
    spawn_codex,
    strip_ansi,
)
from .shell.streams import MessageStream, MessageTooLarge

Status = Literal["ok", "warning", "error"]

MARKS: dict[Status, str] = {"ok": "✓", "warning": "!", "error": "✗"}

#: How long Codex may take to answer ``initialize`` (its start included), then ``account/read``.
HANDSHAKE_SECONDS = 10.0
#: How long ``codex --version`` may take.
VERSION_SECONDS = 10.0

#: How Codex 0.169 begins the ``configWarning`` of a config it cannot load (the server runs on
#: its defaults, but every ``thread/start`` fails with the same error).
_CONFIG_IGNORED = "Invalid configuration"

LOGIN_HINT = (
    "run `codex-acp-bridge login` (Codex's own `codex login`), or set OPENAI_API_KEY where "
    "the editor starts the bridge"
)
INSTALL_HINT = (
    f"install Codex (npm install -g @openai/codex@{PINNED}, the tested version), "
    "or pass --codex-bin PATH"
)

BINARY = "Codex binary"
CREDENTIALS = "Credentials"
CONFIG = "config.toml"
DAEMON = "Daemon"
CHOICE = "Codex used"
ROUND_TRIP = "initialize round trip"


@dataclass(frozen=True)
class Check:
    """One line of the checklist."""

    name: str
    status: Status
    detail: str
    #: What to do about it (for a ✗, always).
    hint: str | None = None


# -- the findings (what gather() saw) ------------------------------------------------------------


@dataclass(frozen=True)
class CodexBinary:
    """The Codex binary ``serve`` would run, and what its ``--version`` said."""

    #: ``None``: none was found (``problem`` says why).
    path: str | None
    #: Where it came from: ``--codex-bin``, the env var, PATH, the pinned copy.
    source: str = ""
    problem: str = ""
    version: str = ""
    #: Why ``--version`` gave no answer (``None``: it did).
    version_failure: str | None = None


@dataclass(frozen=True)
class CodexWarning:
    """A ``configWarning`` (or ``deprecationNotice``) Codex sent while it started."""

    summary: str
    details: str | None = None
    #: The config file it is about, when Codex names one.
    path: str | None = None

    def text(self) -> str:
        return f"{self.summary} {self.details}" if self.details else self.summary

    @property
    def config_ignored(self) -> bool:
        return self.summary.startswith(_CONFIG_IGNORED)


@dataclass(frozen=True)
class Handshake:
    """What one ``codex app-server`` said: its ``initialize`` answer and what came with it."""

    #: From starting Codex to its ``initialize`` answer (or to giving up).
    seconds: float
    #: Why ``initialize`` got no answer (``None``: it did).
    failure: str | None = None
    user_agent: str = ""
    account: codex_palette.AccountReadResult | None = None
    #: Why ``account/read`` got no answer (``None``: it did, or it was not asked).
    account_failure: str | None = None
    warnings: tuple[CodexWarning, ...] = ()
    #: What Codex made of ``config.toml`` (``None``: it was not asked).
    config: ConfigTrial | None = None


@dataclass(frozen=True)
class ConfigTrial:
    """What Codex said of its config: ``config/read``, then, when that failed, the
    ``thread/start`` that ``serve``'s ``session/new`` sends."""

    #: ``config/read``'s error (``None``: Codex read its config).
    read_error: str | None = None
    #: ``thread/start``'s error, what every ``session/new`` will answer (``None``: the thread
    #: started, or it was not tried because ``config/read`` succeeded).
    session_error: str | None = None


@dataclass(frozen=True)
class ConfigFile:
    """``CODEX_HOME/config.toml`` as ``tomllib`` reads it."""

    path: Path
    exists: bool
    #: ``None`` when it is missing or does not parse.
    parsed: dict[str, Any] | None = None
    #: Why it does not parse (or cannot be read): tomllib's words.
    error: str | None = None


@dataclass(frozen=True)
class Environment:
    """What of the user's environment and ``CODEX_HOME`` decides credentials."""

    codex_home: Path
    auth_file: bool
    #: The names of the environment variables set (not empty); never their values.
    variables: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RuntimeDir:
    """The daemon's runtime directory, as found."""

    path: Path
    exists: bool
    #: Permission bits (``stat.S_IMODE``).
    mode: int = 0o700
    owner: int | None = None
    user: int | None = None
    #: A daemon holds the lock now.
    daemon_running: bool = False
    #: What its ``daemon.json`` says (``None``: unreadable, or no daemon runs).
    daemon: DaemonInfo | None = None
    #: Why the directory could not be looked at.
    error: str | None = None


@dataclass(frozen=True)
class Findings:
    binary: CodexBinary
    #: ``None``: Codex was not started (no binary).
    handshake: Handshake | None
    config: ConfigFile
    environment: Environment
    runtime: RuntimeDir
    #: The sentence ``serve`` would print about the Codex it uses ("Codex: ...").
    choice: str = ""
    #: That Codex is one of its own, which cannot start (no binary).
    choice_fails: bool = False


# -- the checks (pure) ------------------------------------------------------------------------


def checklist(findings: Findings) -> list[Check]:
    """Every check, in the order the checklist shows them."""
    handshake = findings.handshake
    return [
        binary_check(findings.binary),
        credentials_check(handshake, findings.config, findings.environment),
        config_check(findings.config, handshake),
        daemon_check(findings.runtime),
        choice_check(findings.choice, fails=findings.choice_fails),
        round_trip_check(handshake, findings.binary),
    ]


def choice_check(says: str, *, fails: bool = False) -> Check:
    """Which Codex ``serve`` would use, and why (each choice works, if it can start)."""
    detail = says.removeprefix("Codex: ") or "(not decided)"
    if fails:
        return Check(CHOICE, "error", detail, INSTALL_HINT)
    return Check(CHOICE, "ok", detail)


def binary_check(binary: CodexBinary) -> Check:
    if binary.path is None:
        return Check(BINARY, "error", binary.problem, INSTALL_HINT)
    where = f"{binary.path} (from {binary.source})" if binary.source else binary.path
    if binary.version_failure is not None:
        return Check(
            BINARY,
            "error",
            f"{where}: `--version` failed: {binary.version_failure}",
            f"check that it is Codex; {INSTALL_HINT}",
        )
    if parse(binary.version) is None:
        said = binary.version or "nothing"
        return Check(BINARY, "warning", f"{where}: no version in what `--version` said ({said})")
    drift = drift_warning(binary.version)
    if drift is not None:
        return Check(
            BINARY,
            "warning",
            f"{where}: {drift}",
            f"for the tested Codex: npm install -g @openai/codex@{PINNED}, or --codex-bin PATH",
        )
    return Check(BINARY, "ok", f"{where}: {binary.version} (tested: {tested_range()})")


def selected_provider(config: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The model provider ``config.toml`` selects (its profile's first) and its table there
    (empty for a built-in provider); ``openai`` when it names none, as Codex defaults."""
    config = config or {}
    name = config.get("model_provider")
    profiles = config.get("profiles")
    profile = profiles.get(config.get("profile")) if isinstance(profiles, dict) else None
    if isinstance(profile, dict) and isinstance(profile.get("model_provider"), str):
        name = profile["model_provider"]
    if not isinstance(name, str) or not name:
        name = "openai"
    providers = config.get("model_providers")
    table = providers.get(name) if isinstance(providers, dict) else None
    return name, table if isinstance(table, dict) else {}


def credentials_check(
    handshake: Handshake | None, config: ConfigFile, environment: Environment
) -> Check:
    """What Codex says (``account/read``) when it could be asked, else what the files say."""
    account = handshake.account if handshake is not None else None
    api_key = next((v for v in API_KEY_VARIABLES if v in environment.variables), None)
    name, provider = selected_provider(config.parsed)
    if account is not None:
        if account.account:
            return Check(CREDENTIALS, "ok", _account(account.account))
        if not account.requiresOpenaiAuth:
            return _provider_credentials(name, provider, environment)
        trial = handshake.config if handshake is not None else None
        # A config Codex cannot load leaves it on its defaults: OpenAI's provider, whatever
        # config.toml selects.
        unloaded = trial is not None and trial.session_error is not None
        said = "Codex's account/read" + (", on its defaults" if unloaded else "")
        return _api_key_or_nothing(api_key, f"not signed in ({said})")
    why = handshake.account_failure or handshake.failure if handshake is not None else None
    unasked = f"Codex could not be asked: {why}" if why else "Codex could not be asked"
    if environment.auth_file:
        return Check(
            CREDENTIALS,
            "ok",
            f"{environment.codex_home / 'auth.json'} present ({unasked})",
        )
    if name != "openai" and provider.get("requires_openai_auth") is not True:
        return _provider_credentials(name, provider, environment)
    return _api_key_or_nothing(api_key, f"no {environment.codex_home / 'auth.json'} ({unasked})")


def _account(account: dict[str, Any]) -> str:
    kind = account.get("type")
    if kind == "chatgpt":
        email = account.get("email") or "an account"
        plan = account.get("planType")
        return f"signed in with ChatGPT: {email}" + (f" ({plan})" if plan else "")
    if kind == "apiKey":
        return "an API key (Codex's own login)"
    return f"{kind} credentials"


def _provider_credentials(
    name: str, provider: Mapping[str, Any], environment: Environment
) -> Check:
    what = f"custom provider {name}" if provider else f"provider {name}"
    key = provider.get("env_key")
    if isinstance(key, str) and key:
        if key in environment.variables:
            return Check(CREDENTIALS, "ok", f"{what} (its key in ${key})")
        return Check(
            CREDENTIALS,
            "error",
            f"{what} reads its key from ${key}, which is not set",
            f"set {key} where the editor starts the bridge (Codex inherits the bridge's environment)",
        )
    if provider.get("experimental_bearer_token"):
        return Check(CREDENTIALS, "ok", f"{what} (a bearer token in config.toml)")
    return Check(CREDENTIALS, "ok", f"{what} (no login needed)")


def _api_key_or_nothing(api_key: str | None, missing: str) -> Check:
    if api_key is not None:
        # Codex reads no key from its environment: serve hands it over when the editor picks
        # the bridge's "API key from the environment" sign-in.
        return Check(
            CREDENTIALS,
            "ok",
            f"an API key in ${api_key} (handed to Codex when the editor picks the API key "
            "sign-in); no Codex login",
        )
    # Not blocking: the editor offers Codex's sign-in (the bridge's authMethods) when a
    # prompt needs it. Signing in beforehand saves that step.
    return Check(CREDENTIALS, "warning", missing, LOGIN_HINT)


def config_check(config: ConfigFile, handshake: Handshake | None) -> Check:
    """What ``serve`` will do with ``config.toml``, in Codex's words when Codex could be asked
    (each error with the one position Codex gives), else in ``tomllib``'s."""
    trial = handshake.config if handshake is not None else None
    warnings = handshake.warnings if handshake is not None else ()
    ignored = [w for w in warnings if w.config_ignored]
    about_file = [w for w in warnings if not w.config_ignored and w.path is not None]
    where = f"{config.path}: "
    refused = f"fix {config.path}: until it loads, Codex refuses every new session"
    if trial is not None and trial.session_error is not None:
        said = trial.session_error
        detail = f"every new session will fail: {said}"
        return Check(
            CONFIG, "error", detail if str(config.path) in said else where + detail, refused
        )
    if trial is not None and trial.read_error is not None:
        return Check(
            CONFIG,
            "warning",
            f"{where}a session starts, but Codex's config/read fails: {trial.read_error}",
        )
    if trial is None and ignored:
        # Codex was not asked further; its warning says the same (with its position).
        said = "; ".join(w.text() for w in ignored)
        return Check(CONFIG, "error", f"{where}every new session will fail: Codex: {said}", refused)
    if trial is None and config.error is not None:
        return Check(CONFIG, "error", f"{where}{config.error} (Codex could not be asked)", refused)
    if ignored:
        said = "; ".join(w.text() for w in ignored)
        return Check(CONFIG, "warning", f"{where}Codex accepts it, yet warns: {said}")
    if about_file:
        said = "; ".join(w.text() for w in about_file)
        return Check(CONFIG, "warning", f"{where}Codex warns: {said}")
    if config.error is not None:
        # tomllib and Codex's parser differ here; Codex decides.
        return Check(
            CONFIG,
            "warning",
            f"{where}Codex accepts it; Python's tomllib does not ({config.error}), so doctor "
            "read nothing from it",
        )
    if not config.exists:
        return Check(CONFIG, "ok", f"none; Codex defaults ({config.path} does not exist)")
    accepted = "Codex accepts it" if trial is not None else "parses (Codex could not be asked)"
    return Check(CONFIG, "ok", f"{where}{accepted}")


def daemon_check(runtime: RuntimeDir) -> Check:
    where = str(runtime.path)
    if runtime.error is not None:
        return Check(
            DAEMON,
            "error",
            f"{where}: {runtime.error}",
            "pass --runtime-dir DIR (or set CODEX_ACP_BRIDGE_RUNTIME_DIR) to a directory of your own",
        )
    if not runtime.exists:
        return Check(DAEMON, "ok", f"none on {where} (see 'Codex used')")
    if runtime.owner is not None and runtime.owner != runtime.user:
        return Check(
            DAEMON,
            "error",
            f"{where} belongs to another user (uid {runtime.owner}): serve would trust "
            "the daemon it names",
            "pass --runtime-dir DIR (or set CODEX_ACP_BRIDGE_RUNTIME_DIR) to a directory of your own",
        )
    if runtime.mode & 0o077:
        mode = f"mode {runtime.mode:04o}"
        chmod = f"chmod 700 {where}"
        # Others writing there could plant a daemon.json of theirs; reading it shows the
        # daemon's address. A daemon makes its directory private when it starts.
        if runtime.mode & 0o022 or runtime.daemon_running:
            running = "a daemon runs there; " if runtime.daemon_running else ""
            return Check(
                DAEMON, "error", f"{running}{where} is open to other users ({mode})", chmod
            )
        return Check(
            DAEMON,
            "warning",
            f"none runs; {where} is readable by other users ({mode}), until a daemon starts "
            "there and makes it private",
            chmod,
        )
    if not runtime.daemon_running:
        return Check(DAEMON, "ok", f"none on {where} (see 'Codex used')")
    info = runtime.daemon
    if info is None:
        return Check(
            DAEMON,
            "warning",
            f"a daemon holds {where}'s lock, but its daemon.json cannot be read",
            "restart the daemon (systemctl --user restart codex-acp-bridge)",
        )
    codex = f"Codex {info.codexVersion}" if info.codexVersion else "Codex"
    seen = f"pid {info.pid}, {codex}" + (f" on {info.url}" if info.url else "")
    why = f": {info.reason}" if info.reason else ""
    if info.state == "failed":
        return Check(
            DAEMON,
            "error",
            f"{seen}: failed{why}",
            "read the daemon's log, then start it again (or serve with --no-daemon)",
        )
    if info.state != "running":
        return Check(DAEMON, "warning", f"{seen}: {info.state}{why} (serve waits for it)")
    drift = drift_warning(info.codexVersion)
    if drift is not None:
        return Check(DAEMON, "warning", f"{seen}; serve attaches to it: the daemon's {drift}")
    return Check(DAEMON, "ok", f"{seen}; serve attaches to it")


def round_trip_check(handshake: Handshake | None, binary: CodexBinary) -> Check:
    if handshake is None:
        return Check(ROUND_TRIP, "error", "not tried: no Codex binary", INSTALL_HINT)
    if handshake.failure is not None:
        program = binary.path or "codex"
        return Check(
            ROUND_TRIP,
            "error",
            f"{handshake.failure} (after {handshake.seconds:.2f} s)",
            f"run `{program} app-server` in a terminal to see what Codex says",
        )
    detail = f"answered in {handshake.seconds:.2f} s: {handshake.user_agent or 'no userAgent'}"
    others = [w for w in handshake.warnings if not w.config_ignored and w.path is None]
    if others:
        said = "; ".join(w.text() for w in others)
        return Check(ROUND_TRIP, "warning", detail, f"Codex warns: {said}")
    return Check(ROUND_TRIP, "ok", detail)


# -- the verdict and its two renderings (pure) ---------------------------------------------


def overall(checks: Sequence[Check]) -> Status:
    """The worst status of any check."""
    statuses = {check.status for check in checks}
    if "error" in statuses:
        return "error"
    return "warning" if "warning" in statuses else "ok"


def exit_code(checks: Sequence[Check]) -> int:
    """1 when something blocks use (a ✗), else 0: a warning does not block."""
    return 1 if overall(checks) == "error" else 0


def as_json(checks: Sequence[Check]) -> dict[str, Any]:
    """What ``--json`` prints: ``{status, checks: [{name, status, detail, hint?}]}``."""
    return {
        "status": overall(checks),
        "checks": [
            {"name": c.name, "status": c.status, "detail": c.detail}
            | ({"hint": c.hint} if c.hint else {})
            for c in checks
        ],
    }


def render(checks: Sequence[Check]) -> str:
    """The checklist: one line per check, a hint under each that has one, a verdict."""
    width = max((len(c.name) for c in checks), default=0)
    lines: list[str] = []
    for check in checks:
        lines.append(f"{MARKS[check.status]} {check.name.ljust(width)}  {check.detail}")
        if check.hint:
            lines.append(f"  {' ' * width}  → {check.hint}")
    errors = sum(c.status == "error" for c in checks)
    warnings = sum(c.status == "warning" for c in checks)
    warned = f"{warnings} warning{'s' if warnings != 1 else ''} (!)" if warnings else ""
    if errors:
        verdict = f"{errors} problem{'s' if errors != 1 else ''} (✗) block{'s' if errors == 1 else ''} use"
        verdict += f"; {warned}" if warned else ""
    else:
        verdict = "Nothing blocks use" + (f"; {warned}" if warned else "")
    lines += ["", verdict + "."]
    return "\n".join(lines) + "\n"


# -- gathering the findings (I/O) -----------------------------------------------------------


def run_doctor(codex_bin: str | None, runtime: str | None, *, json_output: bool) -> int:
    """Gather, print the checklist (or its JSON) on stdout; the exit status."""
    findings = trio.run(gather, codex_bin, runtime, dict(os.environ))
    checks = checklist(findings)
    if json_output:
        print(json.dumps(as_json(checks), indent=2, ensure_ascii=False))
    else:
        print(render(checks), end="")
    return exit_code(checks)


async def gather(codex_bin: str | None, runtime: str | None, env: Mapping[str, str]) -> Findings:
    binary = await find_binary(codex_bin, env)
    handshake = await shake_hands(binary.path) if binary.path is not None else None
    codex_home = Path(env.get("CODEX_HOME") or Path.home() / ".codex")
    return Findings(
        binary=binary,
        handshake=handshake,
        config=read_config(codex_home / "config.toml"),
        environment=Environment(
            codex_home=codex_home,
            auth_file=(codex_home / "auth.json").is_file(),
            variables=frozenset(name for name, value in env.items() if value),
        ),
        runtime=inspect_runtime_dir(runtime_dir(runtime, env)),
        **_choice(codex_bin, runtime, env, own=binary.path),
    )


def _choice(
    codex_bin: str | None, runtime: str | None, env: Mapping[str, str], *, own: str | None
) -> dict[str, Any]:
    from .serve import ServeOptions, choose_codex

    choice = choose_codex(ServeOptions(codex_bin=codex_bin, runtime_dir=runtime), env)
    shared = choice.daemon is not None or choice.url is not None
    return {"choice": choice.says, "choice_fails": not shared and own is None}


async def find_binary(codex_bin: str | None, env: Mapping[str, str]) -> CodexBinary:
    try:
        path = find_codex(codex_bin, env)
    except CodexUnavailable as exc:
        return CodexBinary(None, problem=str(exc))
    if codex_bin:
        source = "--codex-bin"
    elif env.get(ENV_CODEX_BIN):
        source = f"${ENV_CODEX_BIN}"
    elif shutil.which("codex"):
        source = "PATH"
    else:
        source = "the pinned copy"
    version, failure = await codex_version(path)
    return CodexBinary(path, source=source, version=version, version_failure=failure)


async def codex_version(binary: str) -> tuple[str, str | None]:
    """``binary --version``'s answer, or why there is none (as the daemon asks it, but
    bounded in time: a binary that is not Codex may never answer)."""
    try:
        with trio.fail_after(VERSION_SECONDS):
            done = await trio.run_process(
                [binary, "--version"],
                capture_stdout=True,
                capture_stderr=True,
                stdin=subprocess.DEVNULL,
                check=False,
            )
    except OSError as exc:
        return "", str(exc.strerror or exc)
    except trio.TooSlowError:
        return "", f"no answer within {VERSION_SECONDS:g} s"
    said = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0:
        err = strip_ansi(done.stderr.decode(errors="replace")).strip().splitlines()
        return "", f"exit status {done.returncode}" + (f": {err[-1]}" if err else "")
    return said, None


def read_config(path: Path) -> ConfigFile:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ConfigFile(path, exists=False)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        return ConfigFile(path, exists=True, error=f"cannot read it: {why}")
    try:
        return ConfigFile(path, exists=True, parsed=tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        return ConfigFile(path, exists=True, error=str(exc))


def inspect_runtime_dir(directory: Path) -> RuntimeDir:
    """What is there, changing nothing (``daemon`` makes the directory private; not doctor)."""
    try:
        found = directory.stat()
    except FileNotFoundError:
        return RuntimeDir(directory, exists=False)
    except OSError as exc:
        return RuntimeDir(directory, exists=False, error=f"cannot look at it: {exc.strerror}")
    if not stat.S_ISDIR(found.st_mode):
        return RuntimeDir(directory, exists=False, error="not a directory")
    running = daemon_running(directory)
    return RuntimeDir(
        directory,
        exists=True,
        mode=stat.S_IMODE(found.st_mode),
        owner=found.st_uid,
        user=os.getuid(),
        daemon_running=running,
        daemon=read_info(directory) if running else None,
    )


class _InitializeAnswer(msgspec.Struct):
    userAgent: str = ""


class _Warning(msgspec.Struct):
    summary: str
    details: str | None = None
    path: str | None = None


#: What Codex sends while it starts that the user should read.
_WARNINGS = ("configWarning", "deprecationNotice")


class _Conversation:
    """Requests to Codex, one at a time, each read up to its answer; what Codex says
    meanwhile is kept (its warnings) or declined (its requests)."""

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream
        self.peer = Peer[str](jsonrpc_member=False)
        self.warnings: list[CodexWarning] = []
        #: The first line of Codex's stdout that was not JSON-RPC (a binary that is not
        #: Codex's app-server prints something else).
        self.stray: str | None = None

    async def call(self, method: str, params: Any) -> Raw | ErrorObject:
        rid, data = self.peer.request(method, params, method)
        await self.stream.send(data)
        while True:
            data = await self.stream.receive()
            message = self.peer.receive(data)
            if isinstance(message, IncomingResponse) and message.id == rid:
                return message.result
            if isinstance(message, IncomingError) and message.id == rid:
                return message.error
            if isinstance(message, IncomingNotification) and message.method in _WARNINGS:
                self._warned(message.params)
            elif isinstance(message, IncomingRequest):
                await self.stream.send(
                    self.peer.error(message.id, -32601, "codex-acp-bridge doctor answers nothing")
                )
            elif isinstance(message, Invalid) and self.stray is None:
                self.stray = data.decode(errors="replace")[:200]

    async def notify(self, method: str) -> None:
        await self.stream.send(self.peer.notification(method))

    async def drain(self) -> None:
        """Read what Codex wrote before it ended: a process that exits at once closes its
        stdin before our request is written, and what it printed is the clue."""
        with trio.move_on_after(1):
            while True:
                try:
                    data = await self.stream.receive()
                except _ENDED:
                    return
                if isinstance(self.peer.receive(data), Invalid) and self.stray is None:
                    self.stray = data.decode(errors="replace")[:200]

    def _warned(self, params: Raw) -> None:
        try:
            said = msgspec.json.decode(params, type=_Warning)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        self.warnings.append(CodexWarning(said.summary, said.details, said.path))


_ENDED = (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError, MessageTooLarge)


async def shake_hands(binary: str, *, seconds: float = HANDSHAKE_SECONDS) -> Handshake:
    """Start ``codex app-server`` as ``serve`` does, ``initialize`` it, ask ``account/read``,
    and stop it (with everything it started: :func:`spawn_codex` sees to it)."""
    started = time.monotonic()
    try:
        async with spawn_codex(binary) as connection:
            talk = _Conversation(connection.stream)
            params = codex_types.InitializeParams(
                clientInfo=codex_types.ClientInfo(name=AGENT_NAME, version=__version__),
                capabilities=codex_types.InitializeCapabilities(experimentalApi=True),
            )
            try:
                with trio.fail_after(seconds):
                    answer = await talk.call("initialize", params)
            except trio.TooSlowError:
                why = f"no answer to initialize within {seconds:g} s"
                return Handshake(time.monotonic() - started, failure=why)
            except _ENDED:
                await talk.drain()
                why = await connection.exit_reason()
                if talk.stray is not None:
                    why += f" (it printed {talk.stray!r}, not JSON-RPC)"
                return Handshake(time.monotonic() - started, failure=why)
            took = time.monotonic() - started
            if isinstance(answer, ErrorObject):
                return Handshake(took, failure=f"Codex refused initialize: {answer.message}")
            try:
                agent = msgspec.json.decode(answer, type=_InitializeAnswer).userAgent
            except (msgspec.DecodeError, msgspec.ValidationError):
                agent = ""
            account, account_failure = await _read_account(talk, seconds, connection.exit_reason)
            config = await _try_config(talk, seconds)
            return Handshake(
                took,
                user_agent=agent,
                account=account,
                account_failure=account_failure,
                warnings=tuple(talk.warnings),
                config=config,
            )
    except CodexUnavailable as exc:
        return Handshake(time.monotonic() - started, failure=str(exc))


class _ConfigReadParams(msgspec.Struct, omit_defaults=True):
    includeLayers: bool = False


class _TrialStartParams(msgspec.Struct):
    """``thread/start`` as ``serve`` sends it, but ephemeral: Codex keeps nothing of it."""

    cwd: str
    ephemeral: bool = True


async def _try_config(talk: _Conversation, seconds: float) -> ConfigTrial | None:
    """What Codex makes of its config: ``config/read`` (it starts nothing), and when that
    fails, what ``serve``'s first ``session/new`` would meet: ``thread/start``, in an empty
    temporary folder. ``None``: Codex could not be asked (gone, silent, or too old for
    ``config/read``)."""
    try:
        with trio.fail_after(seconds):
            read = await talk.call("config/read", _ConfigReadParams())
            if not isinstance(read, ErrorObject):
                return ConfigTrial()
            if read.code == -32601:  # a Codex without config/read: not asked
                return None
            with tempfile.TemporaryDirectory(prefix="codex-acp-bridge-doctor-") as cwd:
                started = await talk.call("thread/start", _TrialStartParams(cwd=cwd))
    except (trio.TooSlowError, *_ENDED):
        return None
    failure = _one_line(started.message) if isinstance(started, ErrorObject) else None
    return ConfigTrial(read_error=_one_line(read.message), session_error=failure)


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def _read_account(
    talk: _Conversation, seconds: float, exit_reason: Callable[[], Awaitable[str]]
) -> tuple[codex_palette.AccountReadResult | None, str | None]:
    try:
        with trio.fail_after(seconds):
            await talk.notify("initialized")
            answer = await talk.call("account/read", codex_palette.NoParams())
    except trio.TooSlowError:
        return None, f"no answer to account/read within {seconds:g} s"
    except _ENDED:
        return None, await exit_reason()
    if isinstance(answer, ErrorObject):
        return None, f"account/read failed: {answer.message}"
    try:
        return msgspec.json.decode(answer, type=codex_palette.AccountReadResult), None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return None, f"account/read answered something else: {exc}"

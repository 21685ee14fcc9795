"""The checks, pure functions over the findings, and the two renderings of their verdict."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..acp.auth import API_KEY_VARIABLES
from ..codex import palette as codex_palette
from ..codex.versions import PINNED, drift_warning, parse, tested_range
from ..machines import codex_version, kind_and_where, token_refusal
from ..profiles import Profiles
from .findings import (
    CodexBinary,
    ConfigFile,
    Environment,
    Findings,
    Handshake,
    MachineFound,
    RuntimeDir,
)

Status = Literal["ok", "warning", "error"]

MARKS: dict[Status, str] = {"ok": "✓", "warning": "!", "error": "✗"}

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
MACHINES = "Machines"
PROFILE = "Profile"


@dataclass(frozen=True)
class Check:
    """One line of the checklist."""

    name: str
    status: Status
    detail: str
    #: What to do about it (for a ✗, always).
    hint: str | None = None
    #: The machine it is about (the machines' checks).
    machine: str | None = None


def checklist(findings: Findings) -> list[Check]:
    """Every check, in the order the checklist shows them."""
    handshake = findings.handshake
    return [
        binary_check(findings.binary),
        credentials_check(handshake, findings.config, findings.environment),
        config_check(findings.config, handshake),
        daemon_check(findings.runtime),
        choice_check(findings.choice, fails=findings.choice_fails),
        profile_check(findings.profiles, findings.profile_error),
        round_trip_check(handshake, findings.binary),
        *([machines_error_check(findings.machines_error)] if findings.machines_error else []),
        *(check for found in findings.machines for check in machine_checks(found)),
    ]


def choice_check(says: str, *, fails: bool = False) -> Check:
    """Which Codex ``serve`` would use, and why (each choice works, if it can start)."""
    detail = says.removeprefix("Codex: ") or "(not decided)"
    if fails:
        return Check(CHOICE, "error", detail, INSTALL_HINT)
    return Check(CHOICE, "ok", detail)


def profile_check(profiles: Profiles, error: str | None = None) -> Check:
    """The Codex config profile ``serve`` would put in force, its file, and the others a
    session may pick (its ``profile`` option); ``error``: why the one named cannot be used."""
    if error is not None:
        return Check(
            PROFILE,
            "error",
            error,
            "create that file, or name another profile (--profile, $CODEX_ACP_BRIDGE_PROFILE): "
            "serve refuses to start until then",
        )
    detail = profiles.says()
    others = sorted(name for name in profiles.configs if name != profiles.profile)
    if others:
        detail += f"; sessions may pick {', '.join(others)}"
    if profiles.warnings:
        return Check(PROFILE, "warning", f"{detail}; {'; '.join(profiles.warnings)}")
    return Check(PROFILE, "ok", detail)


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
        if account.account is not None:
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


def _account(account: codex_palette.Account) -> str:
    if account.type == "chatgpt":
        email = account.email or "an account"
        plan = account.planType
        return f"signed in with ChatGPT: {email}" + (f" ({plan})" if plan else "")
    if account.type == "apiKey":
        return "an API key (Codex's own login)"
    return f"{account.type} credentials"


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
        legacy = _LEGACY_PROFILE.search(said)
        if legacy is not None:
            # Codex's advice (``codex --profile``) does not reach its app-server; the bridge's does.
            refused = (
                f"remove the profile key from {config.path} and start the bridge with "
                f"--profile {legacy[1]} (it layers $CODEX_HOME/{legacy[1]}.config.toml itself)"
            )
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


#: Codex 0.171's refusal of ``profile = "NAME"`` in ``config.toml``.
_LEGACY_PROFILE = re.compile(r'legacy `profile = "([^"]+)"`')


def daemon_check(runtime: RuntimeDir) -> Check:
    where = str(runtime.path)
    if runtime.error is not None:
        # Refused as serve and the daemon refuse it: serve attaches to no daemon there
        # (it goes on without one), `daemon` does not start there.
        return Check(
            DAEMON,
            "error",
            f"{runtime.error} (serve uses no daemon there)",
            runtime.fix or "use another runtime directory (--runtime-dir)",
        )
    if not runtime.exists:
        return Check(DAEMON, "ok", f"none on {where} (see 'Codex used')")
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


# -- machines ---------------------------------------------------------------------------------


def machines_error_check(error: str) -> Check:
    """The machines named cannot be used as written: ``serve`` would refuse to start."""
    return Check(
        MACHINES,
        "error",
        error,
        "fix the machines file or the --machine flag: serve refuses to start until then",
    )


def machine_checks(found: MachineFound) -> list[Check]:
    """A machine's three lines: reached, its Codex, its exec-server."""
    return [reach_check(found), machine_codex_check(found), exec_server_check(found)]


def known_version(version: str) -> bool:
    """An exec-server's ``executorVersion`` says its Codex, except ``0.0.0``: what a Codex
    binary outside its npm package says (a copy of the pinned binary did)."""
    return bool(version) and version != "0.0.0"


def reach_name(name: str) -> str:
    return f"machine {name}: reachable"


def codex_name(name: str) -> str:
    return f"machine {name}: Codex"


def exec_server_name(name: str) -> str:
    return f"machine {name}: exec-server"


def reach_check(found: MachineFound) -> Check:
    """Reached (ssh logged in and ran the remote shell; a ws machine took a TCP connection),
    else why not in ssh's own words, with what to do about that."""
    name = reach_name(found.name)
    # The first line of a machine's: it names its kind, where the place does not already.
    where = kind_and_where(found.kind, found.where)
    if found.unreachable is None:
        return Check(
            name, "ok", f"{where}: reached in {found.reach_seconds:.2f} s", machine=found.name
        )
    words = found.unreachable
    return Check(name, "error", f"{where}: {words}", _reach_hint(found), machine=found.name)


def _reach_hint(found: MachineFound) -> str:
    if not found.ssh and token_refusal(found.name, found.where) is not None:
        return "use wss:// for it, or an ssh:// machine"
    if not found.ssh:
        return (
            f"start the exec-server there (codex exec-server --listen {found.where} --ws-auth "
            "capability-token --ws-token-file FILE), or correct the machine's URL"
        )
    words = found.unreachable or ""
    lowered = words.lower()
    login = f"`{found.login}`"
    if found.kind in ("podman", "docker"):
        return _container_hint(found, words)
    if found.kind == "command":
        if words.startswith("could not run"):
            return "install the program the machine's command runs, or correct its command"
        return f"run {login} with a command after it in a terminal to see what it does"
    if words.startswith("could not run"):
        return "install OpenSSH's ssh, or name yours with --ssh-command (or $CODEX_ACP_BRIDGE_SSH_COMMAND)"
    if "host key" in lowered and "changed" in lowered:
        return (
            "its host key is not the one your known_hosts holds: find out why; if the change "
            f"is expected, drop the old key (ssh-keygen -R HOST) and log in once with {login} "
            "to accept the new one"
        )
    if "host key" in lowered:
        return (
            f"log in once in a terminal ({login}) to accept its host key: the bridge runs ssh "
            "with BatchMode=yes, which cannot ask"
        )
    if "permission denied" in lowered:
        return (
            "the bridge logs in without a prompt (BatchMode=yes): a key your ssh offers by "
            f"itself (ssh-agent, IdentityFile in ~/.ssh/config); {login} in a terminal shows "
            "what ssh tries"
        )
    return f"run {login} in a terminal to see what ssh does"


def _container_hint(found: MachineFound, words: str) -> str:
    """A container machine not reached: the runtime is missing, or the container is."""
    runtime = found.kind
    container = found.login.split()[-1] if found.login else "CONTAINER"
    lowered = words.lower()
    if words.startswith("could not run"):
        return f"install {runtime}, or put it on PATH for the bridge (and the daemon)"
    if "no such container" in lowered or "no container" in lowered:
        return (
            f"start a container of that name ({runtime} ps -a lists them), or correct the "
            "machine's URL"
        )
    if "running" in lowered or "state improper" in lowered or "not running" in lowered:
        return f"start it: {runtime} start {container}"
    return f"run `{found.login} true` in a terminal to see what {runtime} says"


def _install_there(found: MachineFound) -> str:
    version = found.local_version or PINNED
    where = (
        'codex = "/path/to/codex" in its entry'
        if found.kind == "command"
        else ("?codex=/path/to/codex in the machine's URL")
    )
    return (
        f"install Codex {version} there (npm install -g @openai/codex@{version}), or name it "
        f"with {where}"
    )


def machine_codex_check(found: MachineFound) -> Check:
    """The remote Codex, against this machine's: the link refuses another version."""
    name = codex_name(found.name)
    if found.unreachable is not None:
        return _after("not tried: not reached", name, reach_name(found.name), found)
    if found.codex_failure is not None:
        return Check(
            name,
            "error",
            f"no Codex on {found.where}: {found.codex_failure}",
            _install_there(found),
            machine=found.name,
        )
    if found.ssh:
        said = found.version_line or ""
        remote = codex_version(said)
        if remote is None:
            return Check(
                name,
                "error",
                f"{found.where}: `{found.codex} --version` said {said.strip()!r}, not a version",
                _install_there(found),
                machine=found.name,
            )
    else:
        server = found.server
        if server is None or server.failure is not None:
            why = "not asked: its exec-server did not answer"
            return _after(why, name, exec_server_name(found.name), found)
        if not known_version(server.executor_version):
            said = server.executor_version or "nothing"
            return Check(
                name,
                "warning",
                f"{found.where}: its exec-server does not say its Codex version ({said})",
                f"run `codex --version` there: the link needs Codex {found.local_version or PINNED}",
                machine=found.name,
            )
        remote = server.executor_version
    local = found.local_version
    if local is None:
        return Check(
            name,
            "warning",
            f"{found.where}: Codex {remote}; this machine's Codex version is unknown, so not "
            "compared (the link refuses another version)",
            f"see '{BINARY}'",
            machine=found.name,
        )
    if remote != local:
        return Check(
            name,
            "error",
            f"{found.where} runs Codex {remote}, this machine {local}: the link refuses it",
            _install_there(found),
            machine=found.name,
        )
    return Check(name, "ok", f"{found.where}: Codex {remote}, as here", machine=found.name)


def _after(why: str, name: str, earlier: str, found: MachineFound) -> Check:
    """Check ``name`` of ``found`` not tried, as an ``earlier`` check of it failed (that one
    says what to do)."""
    return Check(name, "error", why, f"see '{earlier}'", machine=found.name)


def exec_server_check(found: MachineFound) -> Check:
    """The exec-server the link runs there answers ``initialize`` in time."""
    name = exec_server_name(found.name)
    server = found.server
    if found.unreachable is not None:
        return _after("not tried: not reached", name, reach_name(found.name), found)
    if server is None:
        return _after("not tried: no Codex there", name, codex_name(found.name), found)
    if server.failure is not None:
        if found.ssh and found.kind == "ssh":
            run = f"{found.login} {shlex.quote(found.codex + ' exec-server --listen stdio')}"
            hint = f"run `{run}` in a terminal to see what it says"
        elif found.ssh:
            run = f"{found.login} {shlex.join([found.codex, 'exec-server', '--listen', 'stdio'])}"
            hint = f"run `{run}` in a terminal to see what it says"
        elif "token" in server.failure:
            hint = (
                "the token file must hold the token the exec-server was started with "
                f"(--ws-token-file there; --machine-token-file {found.name}=FILE here)"
            )
        else:
            hint = f"check that a Codex exec-server listens at {found.where}"
        return Check(
            name,
            "error",
            f"{found.where}: {server.failure} (after {server.seconds:.2f} s)",
            hint,
            machine=found.name,
        )
    what = ", ".join(
        part
        for part in (
            f"Codex {server.executor_version}" if known_version(server.executor_version) else "",
            server.shell,
            f"in {server.cwd.removeprefix('file://')}" if server.cwd else "",
        )
        if part
    )
    detail = f"{found.where}: answered initialize in {server.seconds:.2f} s"
    return Check(name, "ok", detail + (f" ({what})" if what else ""), machine=found.name)


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
            | ({"machine": c.machine} if c.machine else {})
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

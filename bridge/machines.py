"""Machines the user names, where sessions may act: parsed, read from their file, and the
commands that reach them. No trio, no sockets (the shell's link runs them:
``bridge/shell/machine_link.py``).

A machine is ``NAME=URL``:

- ``ssh://[USER@]HOST[:PORT][/PATH][?codex=/path/to/codex]``: the bridge runs the user's
  own ``ssh`` (or ``--ssh-command``, as git's ``GIT_SSH_COMMAND``) to start
  ``codex exec-server --listen stdio`` on HOST, over the SSH channel itself: nothing
  listens on HOST, and here only on loopback;
- ``ws://HOST:PORT[/PATH]`` (or ``wss://``) with a token file: an exec-server someone runs
  already, registered with Codex as it is.

``PATH`` is where the machine's sessions work (without it, the session's own ``cwd``, as a
path on that machine). The machines file (:func:`machines_file`) is TOML, a table per
machine; flags add to it, and a flag's machine replaces the file's of the same name::

    [devbox]
    url = "ssh://me@devbox.example.com/home/me/src"
    description = "the team's build box"

    [gpu]
    url = "ws://127.0.0.1:4600"
    token_file = "~/.config/codex-acp-bridge/gpu.token"
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

#: Where the user keeps their machines, unless ``$CODEX_ACP_BRIDGE_MACHINES`` names a file.
ENV_MACHINES_FILE = "CODEX_ACP_BRIDGE_MACHINES"
#: The command that runs ssh, as ``GIT_SSH_COMMAND`` (``--ssh-command`` wins).
ENV_SSH_COMMAND = "CODEX_ACP_BRIDGE_SSH_COMMAND"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: What every ssh the bridge runs is given, beside the user's own configuration: no
#: prompt (there is no terminal: an editor started the bridge), and a dead link noticed
#: within a minute. Host keys, identities, ProxyJump: the user's, untouched.
SSH_OPTIONS = ("-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=15")


class MachineError(ValueError):
    """A machine the user named cannot be used as written (the message says why)."""


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """One machine, as the user named it."""

    name: str
    url: str
    scheme: str
    host: str
    user: str | None = None
    port: int | None = None
    #: Where its sessions work; ``""``: each session's own ``cwd``.
    path: str = ""
    #: The remote ``codex`` (ssh machines).
    codex: str = "codex"
    #: The exec-server's capability token (ws machines).
    token_file: str | None = None
    description: str = ""

    @property
    def ssh(self) -> bool:
        return self.scheme == "ssh"

    def where(self) -> str:
        """The machine as a person reads it: ``me@devbox:2222``."""
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


def parse_url(name: str, url: str) -> MachineSpec:
    """``url`` for machine ``name`` (see the module docstring), or :class:`MachineError`."""
    if not _NAME.fullmatch(name) or name == "local":
        raise MachineError(
            f"machine name {name!r}: letters, digits, '.', '_' and '-' (and not 'local', "
            "which is this machine)"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("ssh", "ws", "wss"):
        raise MachineError(f"machine {name}: {url!r} is not an ssh://, ws:// or wss:// URL")
    if not parts.hostname:
        raise MachineError(f"machine {name}: {url!r} names no host")
    try:
        port = parts.port
    except ValueError:
        raise MachineError(f"machine {name}: {url!r} has a bad port") from None
    query = parse_qs(parts.query)
    unknown = set(query) - {"codex"}
    if unknown:
        raise MachineError(f"machine {name}: unknown URL parameter {', '.join(sorted(unknown))}")
    if parts.scheme != "ssh":
        if query:
            raise MachineError(f"machine {name}: ?codex= is for ssh:// machines")
        return MachineSpec(name=name, url=url, scheme=parts.scheme, host=parts.hostname, port=port)
    path = unquote(parts.path)
    if path in ("", "/"):
        path = ""
    codex = query.get("codex", ["codex"])[-1]
    return MachineSpec(
        name=name,
        url=url,
        scheme="ssh",
        host=parts.hostname,
        user=unquote(parts.username) if parts.username else None,
        port=port,
        path=path,
        codex=codex,
    )


def parse_flag(text: str) -> MachineSpec:
    """``--machine NAME=URL``."""
    name, sep, url = text.partition("=")
    if not sep or not url:
        raise MachineError(f"--machine takes NAME=URL, got {text!r}")
    return parse_url(name.strip(), url.strip())


def machines_file(env: Mapping[str, str] | None = None) -> Path:
    """The user's machines file: ``$CODEX_ACP_BRIDGE_MACHINES``, else
    ``$XDG_CONFIG_HOME/codex-acp-bridge/machines.toml`` (``~/.config/...``)."""
    env = os.environ if env is None else env
    if env.get(ENV_MACHINES_FILE):
        return Path(env[ENV_MACHINES_FILE]).expanduser()
    config = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "codex-acp-bridge" / "machines.toml"


def read_machines_file(path: Path) -> list[MachineSpec]:
    """The machines of ``path`` (none when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise MachineError(f"{path}: {exc.strerror or exc}") from None
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MachineError(f"{path}: {exc}") from None
    found = []
    for name, table in tables.items():
        if not isinstance(table, dict) or not isinstance(table.get("url"), str):
            raise MachineError(f'{path}: [{name}] needs url = "ssh://..." or "ws://..."')
        unknown = set(table) - {"url", "token_file", "description"}
        if unknown:
            raise MachineError(f"{path}: [{name}] has unknown keys: {', '.join(sorted(unknown))}")
        spec = parse_url(name, table["url"])
        token = table.get("token_file")
        if token is not None:
            token = str(Path(str(token)).expanduser())
        found.append(replace(spec, token_file=token, description=str(table.get("description", ""))))
    return found


def gather(
    flags: Iterable[str],
    token_files: Iterable[str],
    *,
    env: Mapping[str, str] | None = None,
    file: Path | None = None,
) -> list[MachineSpec]:
    """The machines ``serve`` or ``daemon`` acts on: the file's, then the flags' (a flag's
    machine replaces the file's of that name), each ws machine with its token file
    (``--machine-token-file NAME=FILE``)."""
    machines = {m.name: m for m in read_machines_file(file or machines_file(env))}
    for flag in flags:
        spec = parse_flag(flag)
        machines[spec.name] = spec
    for text in token_files:
        name, sep, path = text.partition("=")
        if not sep or not path:
            raise MachineError(f"--machine-token-file takes NAME=FILE, got {text!r}")
        if name not in machines:
            raise MachineError(f"--machine-token-file {name}: no machine named {name}")
        machines[name] = replace(machines[name], token_file=str(Path(path).expanduser()))
    for spec in machines.values():
        if not spec.ssh and spec.token_file is None:
            raise MachineError(
                f"machine {spec.name}: a ws:// exec-server needs its token "
                f"(--machine-token-file {spec.name}=FILE, or token_file in the machines file)"
            )
        if spec.ssh and spec.token_file is not None:
            raise MachineError(
                f"machine {spec.name}: a token file is for ws:// machines; ssh machines get a "
                "fresh token at every start"
            )
    return list(machines.values())


def ssh_command(flag: str | None, env: Mapping[str, str] | None = None) -> list[str]:
    """The program and arguments that run ssh: ``--ssh-command``, else
    ``$CODEX_ACP_BRIDGE_SSH_COMMAND``, else ``ssh`` (split as a shell would)."""
    env = os.environ if env is None else env
    text = flag or env.get(ENV_SSH_COMMAND) or "ssh"
    argv = shlex.split(text)
    if not argv:
        raise MachineError("the ssh command is empty")
    return argv


def ssh_argv(spec: MachineSpec, ssh: list[str], remote: str) -> list[str]:
    """The command that runs ``remote`` (a shell command line) on ``spec``'s host."""
    argv = [*ssh, *SSH_OPTIONS]
    if spec.port:
        argv += ["-p", str(spec.port)]
    if spec.user:
        argv += ["-l", spec.user]
    return [*argv, "--", spec.host, remote]


def version_command(spec: MachineSpec) -> str:
    """What the remote shell runs to say which Codex it has."""
    return f"{shlex.quote(spec.codex)} --version"


def exec_server_command(spec: MachineSpec) -> str:
    """What the remote shell runs for a link: Codex's version on the first line, then the
    exec-server speaking JSON-RPC over the channel (one message a line)."""
    codex = shlex.quote(spec.codex)
    return f"{codex} --version && exec {codex} exec-server --listen stdio"


_VERSION = re.compile(r"\d+\.\d+\.\d+\S*")


def codex_version(line: str) -> str | None:
    """``codex-cli 0.171.0`` → ``0.171.0``."""
    found = _VERSION.search(line)
    return found.group() if found else None


def explain_failure(spec: MachineSpec, status: int | None, stderr: str) -> str:
    """Why reaching ``spec`` failed, in ssh's or the remote shell's own words."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # ssh's banner of a changed host key is many lines; its verdict is the last.
    words = "; ".join(lines[-3:]) if lines else ""
    if status == 127 or "command not found" in stderr or "not found" in words:
        return (
            f"no Codex on {spec.where()} ({spec.codex!r} not found: install it there, or name "
            f"it with ?codex=/path/to/codex in the machine's URL){': ' + words if words else ''}"
        )
    if status is None:
        return words or "the link ended"
    if status == 255:
        return f"ssh to {spec.where()} failed: {words or 'exit status 255'}"
    return f"{spec.where()}: exit status {status}{': ' + words if words else ''}"

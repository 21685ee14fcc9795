"""The machines file (TOML, a table a machine), a command machine's entry, and the machines
``serve`` or ``daemon`` acts on: the file's, then the flags'."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from .sandboxes import sandbox_machine
from .spec import (
    AUTO,
    COMMAND,
    ENV_MACHINES_FILE,
    ENV_SSH_COMMAND,
    MachineError,
    MachineSpec,
    check_name,
)
from .urls import parse_flag, parse_url


def command_machine(
    name: str, command: object, *, codex: object = "codex", path: object = ""
) -> MachineSpec:
    """A machines-file entry ``command = [ARGV...]``: what runs ``CODEX exec-server
    --listen stdio`` there, given after its own words."""
    check_name(name)
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(word, str) and word for word in command)
    ):
        raise MachineError(
            f'machine {name}: command is a list of words, e.g. ["kubectl", "exec", "-i", '
            '"POD", "--"]'
        )
    if not isinstance(codex, str) or not codex:
        raise MachineError(f'machine {name}: codex is the Codex there, e.g. "/usr/bin/codex"')
    if codex == AUTO:
        raise MachineError(
            f'machine {name}: codex = "auto" cannot be: the bridge cannot copy its Codex '
            'through a command; install Codex there and name it, e.g. "/usr/bin/codex"'
        )
    if not isinstance(path, str):
        raise MachineError(f'machine {name}: path is a folder there, e.g. "/src"')
    words = tuple(command)
    return MachineSpec(
        name=name,
        # What the daemon publishes, and what tells two of them apart.
        url=f"{COMMAND}:{shlex.join(words)}",
        scheme=COMMAND,
        host=words[0],
        path="" if path in ("", "/") else path,
        codex=codex,
        command=words,
    )


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
    import tomllib  # here: most starts have no machines file, and its parser costs 2 ms

    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MachineError(f"{path}: {exc}") from None
    found = []
    for name, table in tables.items():
        if isinstance(table, dict) and "image" in table:
            unknown = set(table) - {
                "image",
                "runtime",
                "mount",
                "network",
                "run_args",
                "description",
            }
            if unknown:
                raise MachineError(
                    f"{path}: [{name}] has unknown keys: {', '.join(sorted(unknown))} (a "
                    "machine of a container per session takes image, runtime, mount, network, "
                    "run_args and description)"
                )
            try:
                found.append(sandbox_machine(name, table))
            except MachineError as exc:
                raise MachineError(f"{path}: {exc}") from None
            continue
        if isinstance(table, dict) and "command" in table:
            unknown = set(table) - {"command", "codex", "path", "description"}
            if unknown:
                raise MachineError(
                    f"{path}: [{name}] has unknown keys: {', '.join(sorted(unknown))} (a "
                    "command machine takes command, codex, path and description)"
                )
            try:
                spec = command_machine(
                    name,
                    table["command"],
                    codex=table.get("codex", "codex"),
                    path=table.get("path", ""),
                )
            except MachineError as exc:
                raise MachineError(f"{path}: {exc}") from None
            found.append(replace(spec, description=str(table.get("description", ""))))
            continue
        if not isinstance(table, dict) or not isinstance(table.get("url"), str):
            raise MachineError(
                f'{path}: [{name}] needs url = "ssh://...", "podman://...", "ws://"... or '
                "command = [...]"
            )
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
        if not spec.relayed and spec.token_file is None:
            raise MachineError(
                f"machine {spec.name}: a ws:// exec-server needs its token "
                f"(--machine-token-file {spec.name}=FILE, or token_file in the machines file)"
            )
        if spec.relayed and spec.token_file is not None:
            raise MachineError(
                f"machine {spec.name}: a token file is for ws:// machines; {spec.scheme} "
                "machines get a fresh token at every start"
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

"""The commands that reach a machine: over ssh, into a container, after a command machine's own
words; and what their failures say, in ssh's, the shell's or the runtime's words."""

from __future__ import annotations

import re
import shlex

from .spec import COMMAND, RUNTIMES, SSH_OPTIONS, MachineSpec


def ssh_argv(spec: MachineSpec, ssh: list[str], remote: str) -> list[str]:
    """The command that runs ``remote`` (a shell command line) on ``spec``'s host."""
    argv = [*ssh, *SSH_OPTIONS]
    if spec.port:
        argv += ["-p", str(spec.port)]
    if spec.user:
        argv += ["-l", spec.user]
    return [*argv, "--", spec.host, remote]


def place_argv(spec: MachineSpec, ssh: list[str], codex_args: list[str]) -> list[str]:
    """The command that runs ``spec.codex`` with ``codex_args`` on a relayed machine: over
    ssh (a remote shell's command line), in a container (``podman exec -i``), or after a
    command machine's own words; nothing else in between, so no shell is needed there."""
    if spec.ssh:
        return ssh_argv(spec, ssh, shlex.join([spec.codex, *codex_args]))
    if spec.scheme in RUNTIMES:
        user = ["--user", spec.user] if spec.user else []
        return [spec.scheme, "exec", "-i", *user, spec.host, spec.codex, *codex_args]
    if spec.scheme == COMMAND:
        return [*spec.command, spec.codex, *codex_args]
    raise ValueError(f"machine {spec.name}: a {spec.scheme}:// machine is not reached by a command")


def exec_server_argv(spec: MachineSpec, ssh: list[str]) -> list[str]:
    """What a link runs for each of Codex's connections: a command whose stdio is an
    exec-server speaking JSON-RPC, one message a line. Over ssh the remote shell says
    Codex's version on the first line before it (:func:`version_first`)."""
    if spec.ssh:
        return ssh_argv(spec, ssh, exec_server_command(spec))
    return place_argv(spec, ssh, ["exec-server", "--listen", "stdio"])


def version_first(spec: MachineSpec) -> bool:
    """Whether :func:`exec_server_argv`'s first line is Codex's version (ssh's remote
    shell says it; a container or a command may have no shell to)."""
    return spec.ssh


def version_argv(spec: MachineSpec, ssh: list[str]) -> list[str]:
    """What says which Codex the machine has: its ``--version``."""
    return place_argv(spec, ssh, ["--version"])


def program(spec: MachineSpec, ssh: list[str]) -> str:
    """The program the bridge runs to reach ``spec``, for "could not run" words."""
    return exec_server_argv(spec, ssh)[0]


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
    """Why reaching ``spec`` failed, in ssh's, the remote shell's or the container
    runtime's own words."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # ssh's banner of a changed host key is many lines; its verdict is the last.
    words = "; ".join(lines[-3:]) if lines else ""
    if not spec.ssh:
        return _explain_place(spec, status, words)
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


def _explain_place(spec: MachineSpec, status: int | None, words: str) -> str:
    """A container's or a command's failure: the runtime's words (podman and docker end
    125 when the container is missing or stopped, 126/127 when the program inside cannot
    run)."""
    said = f": {words}" if words else ""
    lowered = words.lower()
    if status in (126, 127) and ("not found" in lowered or "no such file" in lowered):
        return (
            f"no Codex in {spec.where()} ({spec.codex!r} not found: install it there, or "
            f"name it with {codex_hint(spec)}){said}"
        )
    if status is None:
        return words or "the link ended"
    return f"{spec.where()}: {words}" if words else f"{spec.where()}: exit status {status}"


def codex_hint(spec: MachineSpec) -> str:
    """Where the user names the Codex of ``spec``."""
    return 'codex = "/path/to/codex"' if spec.scheme == COMMAND else "?codex=/path/to/codex"

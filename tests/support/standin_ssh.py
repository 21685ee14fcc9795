"""A stand-in for ssh: the "machine" is a folder of this one, its remote shell ``sh -c``.

``stand_in_machine(directory, codex_bin)`` has the members of
:func:`tests.support.sshd.ssh_machine`'s machine that the doctor's tests and the machines
bench use (``ssh_command``, ``wrong_host_key_command``, ``url``, ``workspace``; the same
arguments, ``with_codex=False`` too), so that either serves: the stand-in is quick and
needs no root, the real sshd is what proves the ssh side.

``ssh_command`` runs a small script as ``--ssh-command`` (the bridge appends its options,
``-- HOST`` and the remote command line): it runs its last argument with ``sh -c`` in the
machine's workspace, with ``PATH`` set to the machine's bin folder (holding the pinned
Codex, or nothing) and the system's. Its variants answer as ssh does when it fails, on
stderr and with exit status 255.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from bridge.shell.codex_process import codex_launch

HOST = "devbox"

_RUN = """#!/bin/sh
# A stand-in ssh: [its own options...] -- HOST COMMAND. Runs COMMAND here, in the workspace.
for last; do :; done
cd {workspace} || exit 255
PATH={bin}:/usr/bin:/bin exec sh -c "$last"
"""

_FAIL = """#!/bin/sh
# A stand-in ssh that fails as ssh does.
printf '%s\\n' {words} >&2
exit 255
"""


UNKNOWN_HOST_KEY = (
    f"No ED25519 host key is known for {HOST} and you have requested strict checking.",
    "Host key verification failed.",
)
REFUSED_LOGIN = (f"me@{HOST}: Permission denied (publickey).",)


def failing_ssh(path: Path, words: tuple[str, ...]) -> str:
    """An ssh command that fails as ssh does: ``words`` on stderr, exit status 255."""
    return _script(path, _FAIL.format(words=" ".join(shlex.quote(w) for w in words)))


@dataclass
class StandInMachine:
    directory: Path
    workspace: Path
    bin: Path
    ssh_command: str
    #: ssh finding another host key than known_hosts holds (its banner, then its verdict).
    wrong_host_key_command: str
    #: ssh knowing no host key for it (BatchMode cannot ask).
    unknown_host_key_command: str
    #: ssh refusing the login (no key it may offer).
    refused_login_command: str
    host: str = HOST

    @property
    def url(self) -> str:
        return f"ssh://{self.host}"


def _script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return shlex.quote(str(path))


def shared_folder(prefix: str) -> Path:
    """A folder any user may enter and run programs from (a machine's user, over the
    real sshd, cannot enter a test's own temporary folder)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    return folder


@asynccontextmanager
async def stand_in_machine(
    directory: Path, codex_bin: str, *, with_codex: bool = True
) -> AsyncIterator[StandInMachine]:
    directory.mkdir(parents=True, exist_ok=True)
    workspace = directory / "workspace"
    bin_dir = directory / "bin"
    workspace.mkdir()
    bin_dir.mkdir()
    if with_codex:
        (bin_dir / "codex").symlink_to(codex_launch(codex_bin, os.environ).program)
    run = _script(
        directory / "ssh",
        _RUN.format(workspace=shlex.quote(str(workspace)), bin=shlex.quote(str(bin_dir))),
    )
    changed = (
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
        "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
        f"Offending ED25519 key in {directory}/known_hosts:1",
        f"Host key for {HOST} has changed and you have requested strict checking.",
        "Host key verification failed.",
    )
    wrong = _script(
        directory / "ssh-wrong-host-key",
        _FAIL.format(words=" ".join(shlex.quote(w) for w in changed)),
    )
    unknown = failing_ssh(directory / "ssh-unknown-host-key", UNKNOWN_HOST_KEY)
    refused = failing_ssh(directory / "ssh-refused", REFUSED_LOGIN)
    yield StandInMachine(directory, workspace, bin_dir, run, wrong, unknown, refused)

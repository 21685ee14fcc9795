"""Another local user got to the runtime directory first: nothing of it is trusted.

With ``$XDG_RUNTIME_DIR`` unset, the default runtime directory is a name in the shared
temporary directory. A second local user (:mod:`tests.support.intruder`) made it, with a
``daemon.json`` that names a port of theirs as the daemon's Codex and its page, a
``tokenFile`` only this user can read, this user's ``CODEX_HOME`` and Codex, and the
lock held as by a running daemon. This user's ``serve`` goes on with a Codex of its own,
``status`` and ``doctor`` refuse the directory, ``daemon`` does not start there: each says
why in one line, and nothing, a token least of all, reaches that port.

A runtime directory named in a folder of that user's (``--runtime-dir``) could be renamed
away by them and replaced with theirs once the daemon has checked it: ``daemon`` and
``status`` refuse it, before anything is created there; a daemon whose folder is opened to
others while it runs stops at its next write.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from bridge import __version__
from bridge.codex.versions import PINNED
from bridge.daemon.runtime import codex_home as resolved_home
from tests.support.daemon import StartDaemon
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.intruder import USER, Squat, intruder, squatted_runtime_dir
from tests.support.scenarios.recovery import codex_processes
from tests.test_doctor import clean, line, run_doctor

pytestmark = pytest.mark.e2e

#: One run of a command: a Python start and a look at the directory.
COMMAND_SECONDS = 30


@pytest.fixture
async def squat(
    nursery: trio.Nursery, bridge_env: dict[str, str], codex_bin: str, tmp_path: Path
) -> AsyncIterator[Squat]:
    secret = tmp_path / "secret"  # in the test's own folder (0700): this user's alone
    secret.write_text(secrets.token_urlsafe(24) + "\n")
    secret.chmod(0o600)
    info = {
        "pid": os.getpid(),
        "bridgeVersion": __version__,
        "state": "running",
        "codexPid": os.getpid(),
        "codexVersion": f"codex-cli {PINNED}",
        # What this user's serve would attach to: its own Codex and CODEX_HOME.
        "codexBin": os.path.realpath(codex_bin),
        "codexHome": resolved_home(bridge_env),
        "startedAt": time.time(),
    }
    async with squatted_runtime_dir(nursery, secret, info) as squatted:
        yield squatted


def refusal(squat: Squat) -> str:
    return (
        f"runtime directory {squat.directory} belongs to uid {intruder().pw_uid} ({USER}), "
        "not you: someone else made it; remove it (as root), or use another runtime directory "
        "(--runtime-dir, $CODEX_ACP_BRIDGE_RUNTIME_DIR, or $XDG_RUNTIME_DIR)"
    )


async def test_serve_goes_on_with_a_codex_of_its_own_and_says_why(
    squat: Squat,
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    stderr_file: Path,
) -> None:
    """The editor's plain ``codex-acp-bridge``: a session opens (its own Codex answers),
    and the port ``daemon.json`` names hears nothing."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with trio.open_nursery() as watching:
            watching.start_soon(squat.listener.never_reached)
            async with open_conversation(argv=bridge_argv, env=squat.env(bridge_env)) as talk:
                assert talk.sid
            watching.cancel_scope.cancel()
    said = stderr_file.read_text()
    assert f"codex-acp-bridge: {refusal(squat)} (going on without the daemon)\n" in said, said
    assert squat.listener.heard == []


async def test_status_and_doctor_refuse_it_and_open_nothing(
    squat: Squat, bridge_env: dict[str, str], tmp_path: Path
) -> None:
    opened = tmp_path / "opened"
    browser = f"{sys.executable} -c \"import sys; open('{opened}', 'w').write(sys.argv[1])\" %s"
    env = {**squat.env(clean(bridge_env)), "BROWSER": browser}
    with trio.fail_after(COMMAND_SECONDS):
        for flags in ([], ["--json"], ["--url"], ["--open"]):
            done = await trio.run_process(
                [sys.executable, "-m", "bridge", "status", *flags],
                env=env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert (done.returncode, done.stdout) == (2, b""), (flags, done)
            assert done.stderr.decode() == f"codex-acp-bridge status: {refusal(squat)}\n", flags
    assert not opened.exists(), opened.read_text()
    code, out = await run_doctor(env)
    assert code == 1, out
    what, fix = refusal(squat).split("; ")
    assert line(out, "Daemon").split() == (
        f"✗ Daemon {what} (serve uses no daemon there) → {fix}".split()
    ), out
    assert "its own," in line(out, "Codex used") and "the daemon's" not in out, out
    assert squat.listener.heard == []


async def test_the_daemon_does_not_start_there(squat: Squat, bridge_env: dict[str, str]) -> None:
    with trio.fail_after(COMMAND_SECONDS):
        done = await trio.run_process(
            [sys.executable, "-m", "bridge", "daemon", "--no-page"],
            env=squat.env(bridge_env),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 2, done
    assert done.stderr.decode() == f"codex-acp-bridge daemon: {refusal(squat)}\n"
    assert squat.listener.heard == []


@pytest.fixture
def their_folder() -> Iterator[Path]:
    """A folder :data:`USER` made (0755) in a sticky folder of the test's, as ``/tmp`` is."""
    user = intruder()
    tmp = Path(tempfile.mkdtemp(prefix="cab-sticky-", dir="/tmp"))
    try:
        tmp.chmod(0o1777)
        folder = tmp / "shared"
        subprocess.run(
            ["runuser", "-u", user.pw_name, "--", "mkdir", "-m", "0755", str(folder)],
            check=True,
            timeout=COMMAND_SECONDS,
        )
        assert folder.stat().st_uid == user.pw_uid
        yield folder
    finally:
        shutil.rmtree(tmp)


async def test_a_runtime_directory_in_their_folder_is_refused(
    their_folder: Path, bridge_env: dict[str, str], tmp_path: Path
) -> None:
    """The daemon does not start there (before it looks for Codex), ``status`` reads
    nothing: one line each, status 2."""
    directory = their_folder / "runtime"
    said = (
        f"runtime directory {directory} is in {their_folder}, which belongs to uid "
        f"{intruder().pw_uid} ({USER}), so they could replace it; use another runtime "
        "directory (--runtime-dir, $CODEX_ACP_BRIDGE_RUNTIME_DIR, or $XDG_RUNTIME_DIR)"
    )
    with trio.fail_after(COMMAND_SECONDS):
        no_codex = str(tmp_path / "no-codex")
        for command in (["daemon", "--no-page", "--codex-bin", no_codex], ["status"]):
            done = await trio.run_process(
                [sys.executable, "-m", "bridge", *command, "--runtime-dir", str(directory)],
                env=bridge_env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert (done.returncode, done.stdout) == (2, b""), done
            assert done.stderr.decode() == f"codex-acp-bridge {command[0]}: {said}\n"
    assert list(their_folder.iterdir()) == []


async def test_the_daemon_stops_when_its_folder_is_opened_to_others(
    start_daemon: StartDaemon, runtime: Path, tmp_path: Path
) -> None:
    """Its next write (its Codex lost: the picture and ``daemon.json`` rewritten) finds the
    directory replaceable: nothing is written, the daemon says why in one line, status 2."""
    folder = runtime.parent
    log = tmp_path / "daemon.log"
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon("--no-page") as (daemon, _info):
            folder.chmod(0o777)
            for pid in codex_processes(daemon.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            code = await daemon.wait()
    said = log.read_text().splitlines()
    assert code == 2, said
    assert said[-1] == (
        f"codex-acp-bridge daemon: runtime directory {runtime} is in {folder}, which others "
        "can write to (mode 0777, without the sticky bit), so they could replace it; chmod "
        f"go-w {folder}, or use another runtime directory (--runtime-dir, "
        "$CODEX_ACP_BRIDGE_RUNTIME_DIR, or $XDG_RUNTIME_DIR)"
    ), said
    assert "Traceback" not in log.read_text()

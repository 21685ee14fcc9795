"""Running ``codex-acp-bridge doctor`` as a user does, and reading its checklist."""

from __future__ import annotations

import subprocess
import sys

import trio

#: One doctor run: a Codex start, its handshake (at most 10 s each) and each machine's probe
#: (bounded: 20 s + 10 s), at once, then its stop.
DOCTOR_SECONDS = 60


async def run_doctor(env: dict[str, str], *args: str) -> tuple[int, str]:
    """``doctor ARGS`` in ``env``: its exit status and what it printed (it writes no stderr)."""
    with trio.fail_after(DOCTOR_SECONDS):
        done = await trio.run_process(
            [sys.executable, "-m", "bridge", "doctor", *args],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    assert not done.stderr, done.stderr.decode()
    return done.returncode, done.stdout.decode()


def line(out: str, name: str) -> str:
    """The checklist's line for ``name``, and its hint line when it has one."""
    lines = out.splitlines()
    for i, text in enumerate(lines):
        if text[2:].startswith(name + " "):
            hint = lines[i + 1] if i + 1 < len(lines) and "→" in lines[i + 1] else ""
            return text + ("\n" + hint if hint else "")
    raise AssertionError(f"no {name!r} line in:\n{out}")

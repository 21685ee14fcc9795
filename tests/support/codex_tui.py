"""Codex's own TUI (``codex`` with no subcommand) in a tmux session of the test's own.

The tmux server has a socket of its own (``tmux -S PATH``, no configuration file), so nothing
touches a user's tmux. The TUI runs at a fixed size with ``TERM`` set, in a ``CODEX_HOME`` whose
``config.toml`` turns off update checks and analytics; it starts Codex's daemon itself
(``daemon_auto_start``). At the end the tmux server is killed, Codex's daemon stopped and every
process of that ``CODEX_HOME`` (the daemon's updater included) ended.

Screens are read with ``capture-pane``; a wait polls it until what it looks for holds on several
captures in a row, so a redraw halfway through is never taken for the answer.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from tests.support.codex_daemon import COMMAND_SECONDS, end_processes

#: tmux, which the project's setup installs where it is missing (scripts/setup).
TMUX = shutil.which("tmux") or "tmux"
#: The TUI's size: wide enough that a prompt of a test fits on one line.
COLUMNS, ROWS = 160, 50
#: What the TUI shows in its composer when it is ready for a prompt.
READY = "Ask Codex to do anything"
#: The question Codex asks before it works in a folder it has not been told to trust.
TRUST = "trust"
#: How the TUI marks a user's prompt and an agent's message in its transcript.
USER_MARK = "\N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} "
AGENT_MARK = "\N{BULLET} "
#: How long a screen may take to show what a test waits for.
SCREEN_SECONDS = 30
#: Captures in a row that must agree before a wait is over.
STABLE = 3
POLL = 0.1


@dataclass
class Tui:
    """Codex's TUI in the tmux session ``session`` of the server at ``socket``."""

    socket: Path
    session: str

    async def tmux(self, *args: str, stdin: bytes | None = None) -> str:
        with trio.fail_after(10):
            done = await trio.run_process(
                [TMUX, "-S", str(self.socket), *args],
                stdin=stdin,
                capture_stdout=True,
                capture_stderr=True,
            )
        return str(done.stdout.decode(errors="replace"))

    async def screen(self) -> str:
        """What the TUI shows now (the visible screen)."""
        return await self.tmux("capture-pane", "-p", "-J", "-t", self.session)

    async def history(self) -> str:
        """The visible screen and everything scrolled out of it."""
        return await self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.session)

    async def wait_until(
        self, holds: Callable[[str], bool], what: str, seconds: float = SCREEN_SECONDS
    ) -> str:
        """Wait until ``holds(screen)`` is true on :data:`STABLE` captures in a row; the
        screen then. Past ``seconds``, fail with what the screen shows."""
        screen = ""
        in_a_row = 0
        with trio.move_on_after(seconds):
            while in_a_row < STABLE:
                screen = await self.screen()
                in_a_row = in_a_row + 1 if holds(screen) else 0
                if in_a_row < STABLE:
                    await trio.sleep(POLL)
            return screen
        raise AssertionError(f"the TUI never showed {what} in {seconds} s; its screen:\n{screen}")

    async def wait_for(self, text: str, seconds: float = SCREEN_SECONDS) -> str:
        return await self.wait_until(lambda s: text in s, repr(text), seconds)

    async def wait_gone(self, text: str, seconds: float = SCREEN_SECONDS) -> str:
        return await self.wait_until(lambda s: text not in s, f"no more {text!r}", seconds)

    async def submit(self, prompt: str) -> None:
        """Type ``prompt`` in the composer and send it with Enter.

        The text goes in as a bracketed paste, so its newlines stay in the prompt and the TUI's
        detection of pasted keystrokes (which turns an Enter typed too soon into a newline)
        never applies; Enter goes once the composer shows the text.
        """
        await self.wait_for(READY)
        await self.tmux("load-buffer", "-b", "prompt", "-", stdin=prompt.encode())
        await self.tmux("paste-buffer", "-p", "-d", "-b", "prompt", "-t", self.session)
        await self.wait_for(prompt.splitlines()[-1])
        await self.tmux("send-keys", "-t", self.session, "Enter")


@asynccontextmanager
async def codex_tui(
    socket: Path, home: Path, codex_bin: str, env: dict[str, str], cwd: Path
) -> AsyncIterator[Tui]:
    """Codex's TUI on ``home`` in ``cwd``, ready for a prompt (the folder trusted if it asks).

    ``env`` is the environment Codex gets (its ``CODEX_HOME`` is ``home``), with ``TERM`` set
    and no ``OPENAI_API_KEY``. At the end nothing of it is left running.
    """
    if shutil.which(TMUX) is None:
        pytest.fail("tmux is needed: run the project's setup (scripts/setup), which installs it")
    tui = Tui(socket, "codex")
    tui_env = {key: value for key, value in env.items() if key not in ("TMUX", "OPENAI_API_KEY")}
    tui_env.update(CODEX_HOME=str(home), TERM="xterm-256color", COLORTERM="", NO_COLOR="1")
    # The TUI's own program with its environment: tmux runs a command given as several words
    # without a shell, and its server's environment is not the one Codex should see.
    command = ["env", "-i", *(f"{k}={v}" for k, v in tui_env.items()), codex_bin]
    try:
        with trio.fail_after(10):
            await trio.run_process(
                [
                    TMUX, "-S", str(socket), "-f", "/dev/null",
                    "new-session", "-d", "-s", tui.session,
                    "-x", str(COLUMNS), "-y", str(ROWS), "-c", str(cwd),
                    *command,
                    # A Codex that exits leaves its last screen for the failure message.
                    ";", "set-option", "-t", tui.session, "remain-on-exit", "on",
                ],
                env={k: v for k, v in tui_env.items() if k != "TMUX"},
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
        screen = await tui.wait_until(lambda s: READY in s or TRUST in s, "a prompt")
        if READY not in screen:
            await tui.tmux("send-keys", "-t", tui.session, "Enter")  # trust the folder
        await tui.wait_for(READY)
        yield tui
    finally:
        with trio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await tui.tmux("kill-server")
            with contextlib.suppress(Exception), trio.fail_after(COMMAND_SECONDS):
                await trio.run_process(
                    [codex_bin, "app-server", "daemon", "stop"],
                    env=tui_env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            await end_processes(home)

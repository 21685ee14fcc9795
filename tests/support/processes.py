"""Ending a test's child process: asked first, killed if it does not end in time."""

from __future__ import annotations

import trio


async def wait_or_kill(process: trio.Process, seconds: float) -> None:
    """Wait up to ``seconds`` for ``process`` (already asked to end: its stdin closed, a
    signal sent) to end; kill it if it has not, and reap it."""
    with trio.move_on_after(seconds):
        await process.wait()
    if process.poll() is None:
        process.kill()
        await process.wait()

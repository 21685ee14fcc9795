"""How a lost Codex is brought back: the policy (:class:`Restart`) and its count of
losses (:class:`Backoff`), shared by ``serve``'s supervisor and the daemon's."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Restart:
    """How the shell brings Codex back after it was lost (it had been ready once).

    The first attempt comes after ``first`` seconds, each later one waits twice as
    long, at most ``longest``; a connection that became ready starts the series
    over. ``give_up_after`` losses within ``window`` seconds are a crash loop: the
    shell stops trying, says why on stderr, and the engine fails what comes with
    that reason, while the bridge stays up for the client.
    """

    first: float = 0.25
    longest: float = 30.0
    give_up_after: int = 5
    window: float = 60.0


class Backoff:
    """The losses of one supervised Codex, as :class:`Restart` counts them (no clock of
    its own: each loss comes with the time it happened)."""

    def __init__(self, restart: Restart) -> None:
        self.restart = restart
        self._losses: deque[float] = deque()
        self._delay = restart.first

    def lost(self, now: float, reason: str, *, was_ready: bool) -> tuple[float, str | None]:
        """Record a loss: how long to wait before the next attempt, and, for a crash
        loop, the sentence that says the attempts are over (``None`` otherwise)."""
        restart, losses = self.restart, self._losses
        losses.append(now)
        while losses and losses[0] < now - restart.window:
            losses.popleft()
        if len(losses) >= restart.give_up_after:
            return 0.0, (
                f"Codex was lost {len(losses)} times within {restart.window:g} s; "
                f"not restarting it (last: {reason})"
            )
        if was_ready:
            self._delay = restart.first
        delay = self._delay
        self._delay = min(delay * 2, restart.longest)
        return delay, None

"""Which machine each thread works on, kept for the next bridge: Codex forgets a thread's
environments when it restarts (a resumed thread has every registered one, this machine
first), so the user's pick would be lost with it.

One JSON file, ``$XDG_STATE_HOME/codex-acp-bridge/thread-machines.json`` (``~/.local/state``),
``{thread id: machine}``, written whole under a lock (several ``serve`` and a daemon may
write it) and replaced atomically; a thread back on this machine is removed. No trio: the
engine's effect is carried out in line, and the file is small.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from ..engine.core.machines import LOCAL

log = logging.getLogger(__name__)
#: Past this many threads the oldest picks go (a dict keeps its order of insertion).
MAX_THREADS = 10_000


def store_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "codex-acp-bridge" / "thread-machines.json"


class ThreadMachines:
    """The stored picks (see the module docstring)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or store_path()
        #: What :meth:`cached` read last, and the file's (mtime, size) then.
        self._cache: tuple[tuple[int, int] | None, dict[str, str]] = (None, {})

    def get(self, thread_id: str) -> str | None:
        return self._read().get(thread_id)

    def cached(self, thread_id: str) -> str | None:
        """:meth:`get` for a reader asking often (the daemon, at each thread's change):
        the file is read again only when it changed."""
        try:
            status = self.path.stat()
            stamp: tuple[int, int] | None = (status.st_mtime_ns, status.st_size)
        except OSError:
            stamp = None
        if stamp != self._cache[0]:
            self._cache = (stamp, self._read() if stamp is not None else {})
        return self._cache[1].get(thread_id)

    def set(self, thread_id: str, machine: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with (self.path.parent / ".thread-machines.lock").open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                picks = self._read()
                picks.pop(thread_id, None)
                if machine != LOCAL:
                    picks[thread_id] = machine
                while len(picks) > MAX_THREADS:
                    picks.pop(next(iter(picks)))
                temporary = self.path.with_suffix(".tmp")
                temporary.write_text(json.dumps(picks), encoding="utf-8")
                temporary.replace(self.path)
        except OSError as exc:
            log.warning("could not store thread %s's machine in %s: %s", thread_id, self.path, exc)

    def _read(self) -> dict[str, str]:
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}  # no pick stored yet
        except (OSError, ValueError) as exc:
            log.warning("ignoring %s: %s", self.path, exc)
            return {}
        if isinstance(found, dict):
            return {k: v for k, v in found.items() if isinstance(v, str)}
        return {}

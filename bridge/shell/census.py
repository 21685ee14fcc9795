"""What a long-lived process holds, written where a benchmark reads it.

With ``$CODEX_ACP_BRIDGE_CENSUS`` naming a folder, ``serve`` and ``daemon`` each write
``PID.json`` there once a second: their trio tasks and open descriptors, and what the
caller adds (``serve``: the engine's records and open requests). ``bench/soak.py`` reads
them over a long run to tell growth from noise; without the variable nothing runs.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import trio

ENV_CENSUS = "CODEX_ACP_BRIDGE_CENSUS"
#: Set (to anything), the census also counts the tasks by name (``taskNames``): what piled
#: up, when the count grows. Off by default: it walks the tree and builds strings.
ENV_CENSUS_TASKS = "CODEX_ACP_BRIDGE_CENSUS_TASKS"
#: Set (to anything), the process traces its allocations (:mod:`tracemalloc`) and the
#: census says where the heap grew since the first minute (``heapGrowth``: the sites that
#: grew most, ``file:line``, bytes and blocks). Costly: for finding a leak, not for use.
ENV_CENSUS_HEAP = "CODEX_ACP_BRIDGE_CENSUS_HEAP"
#: Between two writes; and between two looks at the heap.
INTERVAL_SECONDS = 1.0
HEAP_SECONDS = 60.0


def trio_tasks() -> int:
    """Tasks alive in this trio run (the root's tree)."""
    root = trio.lowlevel.current_root_task()
    count, todo = 0, [root] if root is not None else []
    while todo:
        task = todo.pop()
        count += 1
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return count


def task_names() -> dict[str, int]:
    """How many tasks of each name are alive in this trio run (the root's tree)."""
    root = trio.lowlevel.current_root_task()
    names: dict[str, int] = {}
    todo = [root] if root is not None else []
    while todo:
        task = todo.pop()
        names[task.name] = names.get(task.name, 0) + 1
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return names


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


async def keep_census(extra: Callable[[], dict[str, int]] | None = None) -> None:
    """Until cancelled, when ``$CODEX_ACP_BRIDGE_CENSUS`` is set (else returns at once)."""
    folder = os.environ.get(ENV_CENSUS)
    if not folder:
        return
    path = Path(folder) / f"{os.getpid()}.json"
    temporary = path.with_suffix(".tmp")
    by_name = bool(os.environ.get(ENV_CENSUS_TASKS))
    heap = _Heap() if os.environ.get(ENV_CENSUS_HEAP) else None
    try:
        while True:
            counts: dict[str, object] = {"tasks": trio_tasks(), "fds": open_descriptors()}
            if by_name:
                counts["taskNames"] = task_names()
            if heap is not None:
                counts.update(heap.look(trio.current_time()))
            if extra is not None:
                counts.update(extra())
            temporary.write_text(json.dumps(counts))
            temporary.replace(path)
            await trio.sleep(INTERVAL_SECONDS)
    except OSError:
        return  # the folder went: nobody reads it


class _Heap:
    """Where the heap grew: a snapshot after the first minute, compared with one a minute."""

    def __init__(self) -> None:
        tracemalloc.start(1)
        self._started = self._looked = trio.current_time()
        self._first: tracemalloc.Snapshot | None = None
        self._last: dict[str, object] = {}

    def look(self, now: float) -> dict[str, object]:
        if now - self._looked < HEAP_SECONDS:
            return self._last
        self._looked = now
        snapshot = tracemalloc.take_snapshot()
        if self._first is None:
            self._first = snapshot
            return self._last
        growth = snapshot.compare_to(self._first, "lineno")[:15]
        self._last = {
            "heapTraced": tracemalloc.get_traced_memory()[0],
            "heapGrowth": [
                [
                    f"{stat.traceback[0].filename}:{stat.traceback[0].lineno}",
                    stat.size_diff,
                    stat.count_diff,
                ]
                for stat in growth
            ],
        }
        return self._last

"""What a long-lived process holds, written where a benchmark reads it.

With ``$CODEX_ACP_BRIDGE_CENSUS`` naming a folder, ``serve`` and ``daemon`` each write
``PID.json`` there once a second: their trio tasks and open descriptors, and what the
caller adds (``serve``: the engine's records and open requests). ``bench/soak.py`` reads
them over a long run to tell growth from noise; without the variable nothing runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import trio

ENV_CENSUS = "CODEX_ACP_BRIDGE_CENSUS"
#: Set (to anything), the census also counts the tasks by name (``taskNames``): what piled
#: up, when the count grows. Off by default: it walks the tree and builds strings.
ENV_CENSUS_TASKS = "CODEX_ACP_BRIDGE_CENSUS_TASKS"
#: Between two writes.
INTERVAL_SECONDS = 1.0


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
    try:
        while True:
            counts: dict[str, object] = {"tasks": trio_tasks(), "fds": open_descriptors()}
            if by_name:
                counts["taskNames"] = task_names()
            if extra is not None:
                counts.update(extra())
            temporary.write_text(json.dumps(counts))
            temporary.replace(path)
            await trio.sleep(INTERVAL_SECONDS)
    except OSError:
        return  # the folder went: nobody reads it

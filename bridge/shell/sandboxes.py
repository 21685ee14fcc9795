"""A session's own container on a sandbox machine (``image =``): made at the session's first
prompt there, from the machine's spec, with the session's folders and this bridge's Codex
mounted; removed when the session goes or this process does; and, at the next start, the
containers a crashed bridge left (labelled with their owner, ``PID:START``) found and removed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .. import machines as spec_of
from .link_record import Box, Link
from .processes import CHECK_SECONDS, output, run

log = logging.getLogger(__name__)

#: How long making a container may take (its image is local: no pull).
MAKE_SECONDS = 300.0


async def make_box(link: Link, box: Box, codex_program: str | None) -> str | None:
    """The session's container, running: made (or started again) unless it is; else
    why not, in the runtime's words."""
    spec = link.spec
    state = await output(
        [spec.scheme, "container", "inspect", "--format", "{{.State.Running}}", spec.host],
        CHECK_SECONDS,
    )
    if state == "true":
        box.made = True
        return None
    if state == "false":
        failed = await run([spec.scheme, "start", spec.host], CHECK_SECONDS)
        box.made = failed is None
        return None if failed is None else f"{spec.where()}: {failed}"
    found = spec_of.vendor_folder(codex_program) if codex_program else None
    program = found[0] if found is not None else None
    if program is None:
        return (
            f"cannot make a container of {box.machine.image}: this bridge's Codex "
            f"({codex_program or 'none found'}) is not in a Codex package's vendor "
            "folder to mount there"
        )
    owner = process_owner()
    argv = spec_of.sandbox_run_argv(box.machine, spec.host, program, box.folders, owner)
    failed = await run(argv, MAKE_SECONDS)
    if failed is not None:
        return f"cannot make a container of {box.machine.image}: {failed}"
    if not box.machine.mount and box.folders:
        # Not mounted: the session's folders are made there, empty, to work in.
        await run([spec.scheme, "exec", spec.host, "mkdir", "-p", *box.folders], CHECK_SECONDS)
    log.info("machine %s: made %s", box.machine.name, spec.where())
    box.made = True
    return None


async def remove_box(link: Link) -> None:
    """Remove a session's container (its session went, or this process goes)."""
    spec = link.spec
    failed = await run([spec.scheme, "rm", "--force", "--time", "0", spec.host], CHECK_SECONDS)
    if failed is None:
        log.info("machine %s: removed %s", spec.name, spec.where())
    else:
        log.warning("machine %s: %s not removed: %s", spec.name, spec.where(), failed)


async def sweep_boxes(runtimes: set[str]) -> None:
    """Remove the sessions' containers a process that is gone left (a crash), of every
    one of ``runtimes`` (those the sandbox machines here use)."""
    for runtime in sorted(runtimes):
        listed = await output(
            [
                runtime,
                "ps",
                "--all",
                "--filter",
                f"label={spec_of.SANDBOX_LABEL}",
                "--format",
                f'{{{{.Names}}}} {{{{index .Labels "{spec_of.OWNER_LABEL}"}}}}',
            ],
            CHECK_SECONDS,
        )
        if listed.startswith("!"):
            log.info("sandbox containers not listed: %s", listed[1:])
            continue
        for row in listed.splitlines():
            name, _, owner = row.partition(" ")
            if name and not _alive(owner.strip()):
                failed = await run([runtime, "rm", "--force", "--time", "0", name], CHECK_SECONDS)
                log.info(
                    "removed %s, left by a bridge that is gone%s",
                    name,
                    f" ({failed})" if failed else "",
                )


def process_owner() -> str:
    """This process, as a session's container is labelled with it: ``PID:START``."""
    return f"{os.getpid()}:{_started(os.getpid())}"


def _started(pid: int) -> str:
    """When process ``pid`` started, in clock ticks after boot (``""``: no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command may hold spaces and parentheses: the fields after its last ")".
    return stat.rpartition(")")[2].split()[19]


def _alive(owner: str) -> bool:
    """Whether the process a container's ``owner`` label names still runs."""
    pid, _, start = owner.partition(":")
    return pid.isdigit() and bool(start) and _started(int(pid)) == start

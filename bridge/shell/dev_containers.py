"""A ``devcontainer://FOLDER`` machine: the folder's dev container brought up (or found up)
with the devcontainers CLI (``devcontainer up``, the user's ``devcontainer.json``, any runtime
the CLI supports) at each check, and reached from then on as the container it names."""

from __future__ import annotations

import logging

import trio

from .. import machines as spec_of
from .link_record import Link
from .processes import could_not_run, finished

log = logging.getLogger(__name__)

#: How long ``devcontainer up`` may take (it may build an image, and pull one).
UP_SECONDS = 900.0


async def up(link: Link) -> str | None:
    """Bring the dev container up (or find it up) with the devcontainers CLI, and
    reach it from now on; else why not, in the CLI's words."""
    spec = link.spec
    argv = spec_of.up_argv(spec)
    done = await finished(argv, UP_SECONDS)
    if isinstance(done, trio.TooSlowError):
        return f"devcontainer up for {spec.host} took over {UP_SECONDS:.0f} s"
    if isinstance(done, OSError):
        return could_not_run(argv, done) + (
            " (the devcontainers CLI: npm install -g @devcontainers/cli)"
            if isinstance(done, FileNotFoundError)
            else ""
        )
    try:
        container = spec_of.up_container(spec, done.stdout.decode(errors="replace"))
    except spec_of.MachineError as exc:
        lines = [line.strip() for line in done.stderr.decode(errors="replace").splitlines()]
        said = [line for line in lines if line.startswith("Error")][-1:]
        return "; ".join([str(exc), *said])
    if link.container is None or link.container.host != container.host:
        if link.container is not None:  # made anew: what was brought is gone
            link.brought = None
        log.info(
            "machine %s: the dev container of %s is %s", spec.name, spec.host, container.where()
        )
    link.container = container
    return None

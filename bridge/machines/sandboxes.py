"""A sandbox machine (a machines-file entry ``image = ...``): a fresh container of that image for
each session, and what makes one."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from .spec import (
    OWNER_LABEL,
    RUNTIMES,
    SANDBOX,
    SANDBOX_CODEX_DIR,
    SANDBOX_LABEL,
    MachineError,
    MachineSpec,
    check_name,
)


def sandbox_machine(name: str, table: Mapping[str, object]) -> MachineSpec:
    """A machines-file entry ``image = "IMAGE"``: a fresh container for each session."""
    check_name(name)
    image, runtime = table.get("image"), table.get("runtime", "podman")
    if not isinstance(image, str) or not image or image.startswith("-"):
        raise MachineError(f'machine {name}: image names an image, e.g. "debian:bookworm"')
    if runtime not in RUNTIMES:
        raise MachineError(f'machine {name}: runtime is "podman" or "docker", not {runtime!r}')
    mount = table.get("mount", "folders")
    if mount not in ("folders", "none"):
        raise MachineError(
            f'machine {name}: mount is "folders" (the session\'s, at their own paths: the '
            f'default) or "none", not {mount!r}'
        )
    network = table.get("network", "")
    if not isinstance(network, str) or network.startswith("-"):
        raise MachineError(f'machine {name}: network is a network mode, e.g. "none"')
    run_args = table.get("run_args", [])
    if not isinstance(run_args, list) or not all(isinstance(a, str) for a in run_args):
        raise MachineError(f'machine {name}: run_args is a list of words, e.g. ["--memory", "2g"]')
    return MachineSpec(
        name=name,
        # What the daemon publishes, and what tells two of them apart.
        url=f"{SANDBOX}:{runtime}:{image}",
        scheme=SANDBOX,
        host=image,
        codex=f"{SANDBOX_CODEX_DIR}/bin/codex",
        runtime=str(runtime),
        image=image,
        mount=mount == "folders",
        network=network,
        run_args=tuple(run_args),
        description=str(table.get("description", "")),
    )


def sandbox_container(spec: MachineSpec, thread_id: str) -> str:
    """The container of thread ``thread_id`` on sandbox ``spec``: named after both, so a
    person finds it (``podman ps``)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", thread_id)
    return f"codex-acp-bridge-{spec.name}-{safe}"


def sandbox_run_argv(
    spec: MachineSpec, container: str, codex_dir: Path, folders: Iterable[str], owner: str
) -> list[str]:
    """What makes a session's container: from ``spec``'s image, this bridge's Codex
    (``codex_dir``, its vendor folder) mounted read-only at :data:`SANDBOX_CODEX_DIR`, the
    session's ``folders`` at their own paths (unless ``mount = "none"``), labelled with its
    machine and ``owner``; it sleeps until removed, and each link runs the exec-server in
    it."""
    argv = [spec.runtime, "run", "--detach", "--name", container]
    argv += ["--label", f"{SANDBOX_LABEL}={spec.name}", "--label", f"{OWNER_LABEL}={owner}"]
    argv += ["--volume", f"{codex_dir}:{SANDBOX_CODEX_DIR}:ro"]
    if spec.mount:
        for folder in folders:
            argv += ["--volume", f"{folder}:{folder}"]
    if spec.network:
        argv += ["--network", spec.network]
    return [*argv, *spec.run_args, spec.image, "sleep", "infinity"]


def sandbox_box(spec: MachineSpec, environment: str, container: str) -> MachineSpec:
    """A session's container as the machine its link reaches (named by its environment)."""
    return replace(
        spec, name=environment, scheme=spec.runtime, host=container, image="", run_args=()
    )

"""A ``devcontainer://FOLDER`` machine: its configuration read here, and what ``devcontainer up``
says of the container it brought up."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from .spec import (
    CONTAINER_NAME,
    DEVCONTAINER,
    RUNTIMES,
    MachineError,
    MachineSpec,
    container_codex,
)


def devcontainer_machine(name: str, url: str) -> MachineSpec:
    """``devcontainer:///LOCAL/FOLDER`` (or ``devcontainer://~/FOLDER``), with
    ``?runtime=``, ``?user=``, ``?codex=`` (as for a container) and ``?path=`` (the
    folder in the container, when it is not the configuration's workspace folder)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "~"):
        raise MachineError(
            f"machine {name}: {url!r}: a devcontainer:// URL names a folder here, "
            "devcontainer:///home/me/src/app (three slashes) or devcontainer://~/src/app"
        )
    folder = unquote(parts.path)
    if parts.netloc == "~":
        folder = str(Path.home()) + folder
    if not folder.startswith("/") or folder == "/":
        raise MachineError(f"machine {name}: {url!r} names no folder")
    folder = os.path.normpath(folder)
    query = parse_qs(parts.query)
    unknown = set(query) - {"codex", "user", "runtime", "path"}
    if unknown:
        raise MachineError(f"machine {name}: unknown URL parameter {', '.join(sorted(unknown))}")
    runtime = query.get("runtime", [""])[-1]
    if runtime and runtime not in RUNTIMES:
        raise MachineError(f"machine {name}: ?runtime= is podman or docker, not {runtime!r}")
    config = devcontainer_config(Path(folder))
    if config is None:
        raise MachineError(
            f"machine {name}: no .devcontainer/devcontainer.json (or .devcontainer.json) in "
            f"{folder}"
        )
    path = query.get("path", [""])[-1] or workspace_folder(Path(folder), config)
    codex, bring = container_codex(query)
    return MachineSpec(
        name=name,
        url=url,
        scheme=DEVCONTAINER,
        host=folder,
        user=query.get("user", [""])[-1] or None,
        path=path,
        codex=codex,
        bring=bring,
        runtime=runtime,
    )


def devcontainer_config(folder: Path) -> Path | None:
    """The dev container configuration of ``folder``, where the CLI looks first."""
    for each in (folder / ".devcontainer" / "devcontainer.json", folder / ".devcontainer.json"):
        if each.is_file():
            return each
    return None


#: A JSON string (kept), or a // or /* */ comment: devcontainer.json is JSON with comments.
_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.DOTALL)
#: A JSON string (kept), or a comma before a closing bracket (allowed there too).
_TRAILING_COMMA = re.compile(r'("(?:\\.|[^"\\])*")|,(?=\s*[}\]])')


def workspace_folder(folder: Path, config: Path) -> str:
    """Where the CLI puts ``folder`` in its dev container: the configuration's
    ``workspaceFolder`` (its ``${localWorkspaceFolderBasename}`` filled in), else
    ``/workspaces/NAME``. :func:`up_container` checks it against what ``up`` says."""
    default = f"/workspaces/{folder.name}"
    try:
        text = config.read_text(encoding="utf-8")
        for pattern in (_COMMENT, _TRAILING_COMMA):
            text = pattern.sub(lambda m: m.group(1) or "", text)
        found = json.loads(text).get("workspaceFolder")
    except (OSError, ValueError, AttributeError):
        return default
    if not isinstance(found, str) or not found.startswith("/"):
        return default
    return found.replace("${localWorkspaceFolderBasename}", folder.name)


def up_argv(spec: MachineSpec) -> list[str]:
    """What brings ``spec``'s dev container up (or finds it up): the devcontainers CLI."""
    runtime = ["--docker-path", spec.runtime] if spec.runtime else []
    return ["devcontainer", "up", "--workspace-folder", spec.host, *runtime]


def up_container(spec: MachineSpec, stdout: str) -> MachineSpec:
    """The container ``devcontainer up`` said (its last line, JSON), as the machine to
    reach: a container of the dev container's runtime, as its remote user unless the URL
    names one; :class:`MachineError` with the CLI's words when it failed."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        said = json.loads(lines[-1]) if lines else {}
    except ValueError:
        said = {}
    if not isinstance(said, dict) or said.get("outcome") != "success":
        words = [str(said.get(key)) for key in ("message", "description") if said.get(key)]
        raise MachineError(
            f"devcontainer up for {spec.host} failed: {'; '.join(words) or 'no answer'}"
        )
    container, folder = said.get("containerId"), said.get("remoteWorkspaceFolder")
    if not isinstance(container, str) or not CONTAINER_NAME.fullmatch(container):
        raise MachineError(f"devcontainer up for {spec.host} named no container")
    if isinstance(folder, str) and folder != spec.path and "path=" not in spec.url:
        raise MachineError(
            f"the dev container of {spec.host} has its workspace at {folder}, not "
            f"{spec.path}: add ?path={folder} to the machine's URL"
        )
    user = spec.user or (
        said.get("remoteUser") if isinstance(said.get("remoteUser"), str) else None
    )
    return replace(
        spec,
        scheme=spec.runtime or "docker",
        host=container[:12],
        user=user or None,
        runtime="",
    )

"""A session's folders as a client names them: its ``cwd`` and ``additionalDirectories``,
checked (absolute, existing: -32602 naming the one that is not) and normalised, and the
workspace roots Codex is given for them."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING

from msgspec import UNSET, UnsetType

from ...jsonrpc import RpcError

if TYPE_CHECKING:
    from .hub import Hub


def check_directory(hub: Hub, cwd: str, method: str) -> None:
    """``cwd`` must be an absolute path to an existing directory (-32602 naming it)."""
    if not cwd.startswith("/"):
        raise RpcError.invalid_params(f"{method}: cwd must be an absolute path, got {cwd!r}")
    if not hub.setup.is_directory(cwd):
        raise RpcError.invalid_params(
            f"{method}: cwd {cwd!r} is not an existing directory", {"cwd": cwd}
        )


def workspace_roots(cwd: str, folders: Sequence[str]) -> list[str] | UnsetType:
    """Codex's ``runtimeWorkspaceRoots`` for a session with ``folders`` beside ``cwd``
    (thread-scoped and experimental; not config's ``sandbox_workspace_write.writable_roots``,
    which would replace the user's own); ``UNSET`` without: Codex's roots are ``cwd`` alone."""
    return [cwd, *folders] if folders else UNSET


def check_folders(
    hub: Hub, cwd: str, folders: Sequence[str] | None, method: str
) -> tuple[str, ...]:
    """A session's ``additionalDirectories``: each an absolute path to an existing directory
    (-32602 naming it), normalised (no ``..``, no trailing ``/``), in the client's order, each
    once and ``cwd`` left out (it is the session's first folder already)."""
    kept: list[str] = []
    for index, folder in enumerate(folders or ()):
        if not folder.startswith("/"):
            raise RpcError.invalid_params(
                f"{method}: additionalDirectories[{index}] must be an absolute path, "
                f"got {folder!r}",
                {"additionalDirectories": list(folders or ())},
            )
        if not hub.setup.is_directory(folder):
            raise RpcError.invalid_params(
                f"{method}: additionalDirectories[{index}] {folder!r} is not an existing directory",
                {"additionalDirectories": list(folders or ())},
            )
        normal = posixpath.normpath(folder)
        if normal != posixpath.normpath(cwd) and normal not in kept:
            kept.append(normal)
    return tuple(kept)

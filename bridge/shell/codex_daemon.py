"""Codex's own daemon (``codex app-server daemon start``) of a ``CODEX_HOME``, from its files:
where it listens, whether it answers there, the version it runs and its pid. The bridge
attaches to it (``serve``) or watches it (the bridge's daemon); it never starts one.

No trio, and nothing imported but what is read: ``serve`` asks these before trio starts.
Read as ``codex_daemon.socket_path(home)``, ``codex_daemon.answers(path)``...
"""

from __future__ import annotations

import os
from pathlib import Path

#: Where Codex's own daemon listens, in ``CODEX_HOME``.
SOCKET = Path("app-server-control") / "app-server-control.sock"


def socket_path(codex_home: str) -> Path:
    return Path(codex_home) / SOCKET


def version(codex_home: str) -> str | None:
    """The version of the copy Codex's daemon runs (``packages/app-server-daemon/current``
    links to ``releases/VERSION-TARGET``), if it can be told."""
    current = Path(codex_home) / "packages" / "app-server-daemon" / "current"
    try:
        release = Path(os.readlink(current)).name
    except OSError:
        return None
    return release.split("-", 1)[0] or None


def pid(codex_home: str) -> int | None:
    """The pid Codex's daemon publishes (``app-server-daemon/daemon.pid``), if readable."""
    import json

    try:
        said = json.loads((Path(codex_home) / "app-server-daemon" / "daemon.pid").read_text())
        published = said["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return published if isinstance(published, int) else None


def answers(path: Path, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on Codex's daemon socket ``path`` (a socket
    file left by a daemon that died refuses them)."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(timeout)
            probe.connect(os.path.realpath(path))
    except OSError:
        return False
    return True

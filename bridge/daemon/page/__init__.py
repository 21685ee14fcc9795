"""The daemon's live page: every thread, what waits on a person, the answer one click away.

- :mod:`.board`: what the page shows and which of its actions go to Codex (pure);
- :mod:`.actions`: what a page may ask over its WebSocket, each message typed or refused (pure);
- :mod:`.access`: who may load the page and open its WebSocket (pure);
- :mod:`.server`: the HTTP and WebSocket server, and the hub between it and the
  daemon's watcher connection to Codex;
- ``static/``: the page itself (HTML, CSS, JavaScript; no framework, nothing fetched).

:func:`open_page` opens its listener as the daemon starts.
"""

from __future__ import annotations

import ipaddress
import ssl as ssl_module
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..runtime import new_page_token
from .access import Access


class PageRefused(Exception):
    """The page cannot be served as asked; the message says why."""


@dataclass(frozen=True)
class PageOptions:
    """``daemon --page-*``."""

    host: str = "127.0.0.1"
    port: int = 0
    tls_cert: str | None = None
    tls_key: str | None = None
    #: Origins a proxy of the user's serves the page under (``https://box.example``).
    origins: tuple[str, ...] = field(default_factory=tuple)


@dataclass
class OpenPage:
    listeners: list[trio.SocketListener]
    access: Access
    url: str
    ssl: ssl_module.SSLContext | None


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def open_page(directory: Path, options: PageOptions) -> OpenPage:
    """The page's listener, its access rules and its URL. Its secret is new at each call
    (each start of the daemon): one an old tab kept lets it in no more."""
    tls = options.tls_cert is not None
    if not loopback(options.host) and not tls:
        raise PageRefused(
            f"the page listens on {options.host} only with TLS (--page-tls-cert, "
            "--page-tls-key); or keep it on loopback behind a proxy of yours (--page-origin)"
        )
    context = None
    if tls:
        context = ssl_module.create_default_context(ssl_module.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(str(options.tls_cert), options.tls_key)
        except (OSError, ssl_module.SSLError) as exc:
            raise PageRefused(f"cannot use the page's TLS certificate: {exc}") from exc
    try:
        listeners = await trio.open_tcp_listeners(options.port, host=options.host)
    except OSError as exc:
        raise PageRefused(
            f"cannot listen on {options.host}:{options.port}: {exc.strerror}"
        ) from exc
    port = int(listeners[0].socket.getsockname()[1])
    token = new_page_token(directory)
    access = Access.for_address(token, port, tls=tls, extra_origins=options.origins)
    name = options.host
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    if name == "localhost":
        name = "127.0.0.1"
    url = f"{'https' if tls else 'http'}://{name}:{port}/"
    if not loopback(options.host):
        access = Access(
            access.token,
            access.hosts | {f"{name}:{port}"},
            access.origins | {f"https://{name}:{port}"},
        )
    return OpenPage(listeners, access, url, context)

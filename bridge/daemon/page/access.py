"""Who may see the daemon's page and talk to its WebSocket (pure: a request in, a verdict out).

Every request is checked, the page's files as much as the WebSocket:

1. ``Host`` must name the page's own address (``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT``) or an origin the user allowed (``--page-origin``, a proxy of theirs):
   a page of another site that rebinds its DNS name to 127.0.0.1 sends its own name and
   is refused.
2. ``Origin``, when the browser sends one (always on a WebSocket, where it is required),
   must be one of those: another site's script cannot open the WebSocket.
3. The page's files (``/``, ``/page.js``, ``/page.css``) hold no data: every ``GET`` that
   passes 1 and 2 gets them, and a secret in its URL changes nothing. What the daemon knows
   goes only over the WebSocket, and only once its first message holds the daemon's
   secret token (:func:`admit`, compared in constant time).

The secret is never in a cookie: a browser sends the cookies of 127.0.0.1 to every port of
127.0.0.1 (cookies are kept by host, and "same-site" ignores the port), so a server of
another local user's would get it with any request its own page makes. Nor is it in a URL
a server receives: ``status --url`` gives it in the address's fragment (``#token=…``),
which the browser keeps to itself; the page's script moves it into the tab's
``sessionStorage`` (the page's origin alone, its port included), takes it out of the
address bar and the history (``history.replaceState``), and sends it as the WebSocket's
first message.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from ...jsonrpc.peer import MAX_DEPTH, too_deep


@dataclass(frozen=True)
class Serve:
    """Serve this file (name, content type)."""

    name: str
    content_type: str


#: The page's files, by path; ``/ws`` is the WebSocket.
FILES = {
    "/": Serve("index.html", "text/html; charset=utf-8"),
    "/page.js": Serve("page.js", "text/javascript; charset=utf-8"),
    "/page.css": Serve("page.css", "text/css; charset=utf-8"),
}
SOCKET = "/ws"


@dataclass(frozen=True)
class Access:
    token: str
    #: ``Host`` values accepted, and ``Origin`` values accepted.
    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def for_address(
        cls, token: str, port: int, *, tls: bool = False, extra_origins: Iterable[str] = ()
    ) -> Access:
        scheme = "https" if tls else "http"
        hosts = {f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")}
        origins = {f"{scheme}://{host}" for host in hosts}
        for origin in extra_origins:
            parts = urlsplit(origin)
            hosts.add(parts.netloc)
            origins.add(f"{parts.scheme}://{parts.netloc}")
        return cls(token, frozenset(hosts), frozenset(origins))


@dataclass(frozen=True)
class Upgrade:
    """Open the WebSocket (its first message must hold the secret: :func:`admit`)."""


@dataclass(frozen=True)
class Refuse:
    status: int
    reason: str


Verdict = Serve | Upgrade | Refuse


def check(access: Access, target: str, headers: Mapping[str, str], method: str = "GET") -> Verdict:
    """The verdict on a request for ``target`` with ``headers`` (names lower-case)."""
    if method != "GET":
        # The page only reads; what it does goes over the WebSocket.
        return Refuse(405, "only GET")
    host = headers.get("host", "")
    if host not in access.hosts:
        return Refuse(403, "foreign Host")
    origin = headers.get("origin")
    path = urlsplit(target).path
    if origin is None and path == SOCKET:
        return Refuse(403, "no Origin")
    if origin is not None and origin not in access.origins:
        return Refuse(403, "foreign Origin")
    if path == SOCKET:
        return Upgrade()
    return FILES.get(path) or Refuse(404, "not found")


class _Secret(msgspec.Struct):
    """The WebSocket's first message: ``{"type": "token", "token": SECRET}``."""

    type: Literal["token"]
    token: str


_SECRET = msgspec.json.Decoder(_Secret)


def admit(access: Access, message: str | bytes) -> str | None:
    """Why the WebSocket's first ``message`` does not let the page in (the reason its
    socket is closed with); ``None`` when it holds the daemon's secret."""
    if not isinstance(message, str):
        return "no token"  # the page sends text
    data = message.encode("utf-8", "surrogatepass")
    if len(data) > 2 * MAX_DEPTH and too_deep(data):
        return "no token"
    try:
        given = _SECRET.decode(data).token
    except msgspec.DecodeError:  # not JSON, not the secret's message (a ValidationError)
        return "no token"
    if not hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), access.token.encode("utf-8", "surrogatepass")
    ):
        return "wrong token"
    return None


#: Sent with every answer: nothing but the daemon's own files and WebSocket, never framed.
SECURITY_HEADERS = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("X-Frame-Options", "DENY"),
)

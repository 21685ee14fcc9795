"""Who may see the daemon's page and talk to its WebSocket (pure: a request in, a verdict out).

Every request is checked, the page's files as much as the WebSocket:

1. ``Host`` must name the page's own address (``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT``) or an origin the user allowed (``--page-origin``, a proxy of theirs):
   a page of another site that rebinds its DNS name to 127.0.0.1 sends its own name and
   is refused.
2. ``Origin``, when the browser sends one (always on a WebSocket, where it is required),
   must be one of those: another site's script cannot open the WebSocket.
3. The daemon's secret token: in the URL once (``status --url`` prints it), answered with
   a cookie holding it (``HttpOnly``, ``SameSite=Strict``) and a redirect to the same page
   without it, so the token leaves the address bar and the history; then the cookie on
   every request. Compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit


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
    #: Cookies go only over TLS (the page is served with TLS).
    secure: bool = False
    cookie: str = "codex_acp_bridge"

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
        # A cookie per daemon: cookies ignore ports, and two daemons may share a host.
        return cls(token, frozenset(hosts), frozenset(origins), tls, f"codex_acp_bridge_{port}")


@dataclass(frozen=True)
class Upgrade:
    """Open the WebSocket."""


@dataclass(frozen=True)
class Login:
    """Set the cookie and send the browser to ``location`` (the URL without its token)."""

    set_cookie: str
    location: str


@dataclass(frozen=True)
class Refuse:
    status: int
    reason: str


Verdict = Serve | Upgrade | Login | Refuse


def check(access: Access, target: str, headers: Mapping[str, str], method: str = "GET") -> Verdict:
    """The verdict on a request for ``target`` with ``headers`` (names lower-case)."""
    if method != "GET":
        # The page only reads; what it does goes over the WebSocket.
        return Refuse(405, "only GET")
    host = headers.get("host", "")
    if host not in access.hosts:
        return Refuse(403, "foreign Host")
    origin = headers.get("origin")
    parts = urlsplit(target)
    websocket = parts.path == SOCKET
    if origin is None and websocket:
        return Refuse(403, "no Origin")
    if origin is not None and origin not in access.origins:
        return Refuse(403, "foreign Origin")
    given = parse_qs(parts.query).get("token")
    if given is not None and not websocket:
        if not _same(given[-1], access.token):
            return Refuse(403, "wrong token")
        secure = "; Secure" if access.secure else ""
        return Login(
            f"{access.cookie}={access.token}; Path=/; HttpOnly; SameSite=Strict{secure}",
            # Only one of the page's own paths: never a redirect elsewhere (``/\\host``).
            parts.path if parts.path in FILES else "/",
        )
    kept = _cookies(headers.get("cookie", "")).get(access.cookie)
    if kept is None:
        return Refuse(401, "no token")
    if not _same(kept, access.token):
        return Refuse(403, "wrong token")
    if websocket:
        return Upgrade()
    return FILES.get(parts.path) or Refuse(404, "not found")


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _cookies(header: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name and name not in out:
            out[name] = value
    return out


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

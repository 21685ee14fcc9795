"""Where the bridge may send a token: over TLS (``wss://``), or in plain text only to this
machine (``ws://`` to a loopback address: 127.0.0.0/8, ``::1``, ``localhost``). Codex holds
an exec-server's URL to the same rule ("remote auth tokens require `wss://` or loopback
`ws://` URLs"). A plain-text WebSocket to any other host hands its ``Authorization: Bearer``
to whoever is on the way.

Judged from the URL as written, before any connection: a host name other than
``localhost`` is not looked up (it could resolve anywhere, now or later), so it is refused
over ``ws://`` even when it names this machine. No I/O here.
"""

from __future__ import annotations

import ipaddress
from typing import Literal
from urllib.parse import urlsplit

#: The one host name taken for loopback without looking it up.
LOCALHOST = "localhost"


def is_loopback(host: str) -> bool:
    """``host`` (as :func:`urllib.parse.urlsplit` gives it: no brackets, lower case) is this
    machine's loopback: an address of 127.0.0.0/8 or ``::1`` (also IPv4-mapped), or
    ``localhost``."""
    if host == LOCALHOST:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def plain_text_refusal(url: str) -> str | None:
    """Why a token must not be sent to ``url`` (``None``: it may): a ``ws://`` URL whose host
    is not loopback. Other schemes (``wss://``, ``unix://``) are not this rule's to judge."""
    try:
        parts = urlsplit(url)
        scheme, host = parts.scheme.lower(), parts.hostname
    except ValueError:  # e.g. an unclosed "[": whose host it names is anyone's guess
        scheme, host = url.partition(":")[0].strip().lower(), None
    if scheme != "ws":
        return None
    if host and is_loopback(host):
        return None
    where = host or "a host it does not name clearly"
    return (
        f"{url} would carry its token in plain text to {where}, which is not this machine "
        "(a loopback address)"
    )


def codex_url_refusal(url: str) -> str | None:
    """Why Codex's app-server at ``url`` (``--codex-url``, or what a daemon published) must
    not be sent a token (``--codex-token-file``); ``None``: it may."""
    why = plain_text_refusal(url)
    if why is None:
        return None
    return (
        f"Codex at {why}: use wss://, or forward Codex's port over ssh "
        "(ssh -L 127.0.0.1:PORT:127.0.0.1:PORT HOST) and name ws://127.0.0.1:PORT"
    )


def websocket_proxy(url: str) -> Literal[True] | None:
    """websockets' ``proxy`` option of ``connect`` for ``url``: ``None`` (none) for
    ``ws://``, a loopback URL once :func:`plain_text_refusal` let it pass (a proxy of the
    environment's would read its token on the way, and reach its own loopback, not this
    machine's); ``True`` (the user's proxy, websockets' default) for ``wss://``."""
    return None if urlsplit(url).scheme.lower() == "ws" else True

"""A machine from its URL: ``--machine NAME=URL``, or a machines-file entry's ``url``."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from .devcontainers import devcontainer_machine
from .spec import (
    AUTO,
    BRING_ALWAYS,
    CONTAINER_NAME,
    DEVCONTAINER,
    RUNTIMES,
    MachineError,
    MachineSpec,
    check_name,
    container_codex,
    token_refusal,
)


def parse_url(name: str, url: str) -> MachineSpec:
    """``url`` for machine ``name`` (see the module docstring), or :class:`MachineError`."""
    check_name(name)
    parts = urlsplit(url)
    if parts.scheme in RUNTIMES:
        return _container(name, url)
    if parts.scheme == DEVCONTAINER:
        return devcontainer_machine(name, url)
    if parts.scheme not in ("ssh", "ws", "wss"):
        raise MachineError(
            f"machine {name}: {url!r} is not an ssh://, podman://, docker://, devcontainer://, "
            "ws:// or wss:// URL"
        )
    if not parts.hostname:
        raise MachineError(f"machine {name}: {url!r} names no host")
    try:
        port = parts.port
    except ValueError:
        raise MachineError(f"machine {name}: {url!r} has a bad port") from None
    query = parse_qs(parts.query)
    unknown = set(query) - {"codex"}
    if unknown:
        raise MachineError(f"machine {name}: unknown URL parameter {', '.join(sorted(unknown))}")
    if parts.scheme != "ssh":
        if query:
            raise MachineError(
                f"machine {name}: ?codex= is for ssh://, podman:// and docker:// machines"
            )
        refused = token_refusal(name, url)
        if refused is not None:
            raise MachineError(refused)
        return MachineSpec(name=name, url=url, scheme=parts.scheme, host=parts.hostname, port=port)
    path = unquote(parts.path)
    if path in ("", "/"):
        path = ""
    codex = query.get("codex", ["codex"])[-1]
    bring = ""
    if codex == AUTO:
        # Copied through ssh into the user's cache folder there (a Linux machine of this
        # one's architecture), and run from there.
        codex, bring = "codex", BRING_ALWAYS
    return MachineSpec(
        name=name,
        url=url,
        scheme="ssh",
        host=parts.hostname,
        user=unquote(parts.username) if parts.username else None,
        port=port,
        path=path,
        codex=codex,
        bring=bring,
    )


def _container(name: str, url: str) -> MachineSpec:
    """``podman://[USER@]CONTAINER[/PATH][?user=USER][&codex=CODEX]`` (or ``docker://``).
    The container's name is case-sensitive: it is read as written, not as a host name."""
    parts = urlsplit(url)
    userinfo, at, container = parts.netloc.rpartition("@")
    container = unquote(container)
    if not container:
        raise MachineError(f"machine {name}: {url!r} names no container")
    if not CONTAINER_NAME.fullmatch(container):
        raise MachineError(f"machine {name}: {container!r} is not a container's name or ID")
    query = parse_qs(parts.query)
    unknown = set(query) - {"codex", "user"}
    if unknown:
        raise MachineError(f"machine {name}: unknown URL parameter {', '.join(sorted(unknown))}")
    user = query.get("user", [unquote(userinfo) if at else ""])[-1] or None
    path = unquote(parts.path)
    codex, bring = container_codex(query)
    return MachineSpec(
        name=name,
        url=url,
        scheme=parts.scheme,
        host=container,
        user=user,
        path="" if path in ("", "/") else path,
        codex=codex,
        bring=bring,
    )


def parse_flag(text: str) -> MachineSpec:
    """``--machine NAME=URL``."""
    name, sep, url = text.partition("=")
    if not sep or not url:
        raise MachineError(f"--machine takes NAME=URL, got {text!r}")
    return parse_url(name.strip(), url.strip())

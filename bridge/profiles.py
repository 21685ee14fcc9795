"""Codex's config profiles, layered by the bridge itself: ``$CODEX_HOME/NAME.config.toml``.

``codex --profile NAME`` layers that file over ``config.toml``, and ``-c`` overrides over
both, but only for Codex's runtime commands: ``codex app-server`` takes no profile (Codex
0.171 refuses ``--profile`` there, and the old ``profile = "NAME"`` key of ``config.toml``).
So the bridge does the layering: it reads the profile and sends it as the ``config`` of
every thread it starts or opens, as dotted keys (the form ``thread/start``'s ``config``
takes, like ``-c``: Codex sets each key's value where the dots lead, so tables merge key
by key as Codex's own layers do, and any other value replaces the one below it). The
``-c`` overrides come last, so they win over the profile, as they do in Codex. The same
``config`` works with any Codex, a shared one (the bridge's daemon, Codex's own) too, so
each editor gets its own profile from one Codex.

Two things a profile says cannot be carried this way, and are said (``serve`` logs a
warning, ``doctor`` a line): a key Codex reads once, when it starts (sign-in, its stores,
telemetry: :data:`PROCESS_WIDE_KEYS`), which no thread's ``config`` changes; and a table key
that holds a dot (``[projects."/a/b.c"]``): Codex splits a key at every dot, so that table
is sent whole, one level up, and replaces what ``config.toml`` has there.

Pure but for :func:`find_profiles` and :func:`load_profile`, which read the files.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The profile ``serve``, ``daemon`` and ``doctor`` use when ``--profile`` names none.
ENV_PROFILE = "CODEX_ACP_BRIDGE_PROFILE"
#: What a profile's file name ends with (``fast.config.toml``: the profile ``fast``).
SUFFIX = ".config.toml"

#: Config keys (their first part) a Codex reads once, when it starts: sign-in, its own
#: stores, telemetry. Sent with a thread/start they would change nothing.
PROCESS_WIDE_KEYS = frozenset(
    {
        "cli_auth_credentials_store",
        "forced_login_method",
        "forced_chatgpt_workspace_id",
        "chatgpt_base_url",
        "mcp_oauth_credentials_store",
        "sqlite_home",
        "log_dir",
        "otel",
        "analytics",
        "feedback",
    }
)


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file looked for."""


@dataclass(frozen=True)
class Profile:
    """One profile file, read."""

    name: str
    path: Path
    #: The file as ``tomllib`` reads it.
    table: dict[str, Any] = field(default_factory=dict)

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``config`` of a thread with this profile in force: see :func:`layer`."""
        return layer(self.table, overrides or {})

    def unsent(self) -> list[str]:
        """The keys this profile sets that a thread's ``config`` cannot change."""
        return sorted(k for k in self.table if k in PROCESS_WIDE_KEYS)


@dataclass(frozen=True)
class Profiles:
    """Codex's config profiles, as ``serve`` gives them to the engine
    (:func:`bridge.serve.read_profiles`)."""

    #: The one in force at first (``None``: none), and its file.
    profile: str | None = None
    path: Path | None = None
    #: Where the name came from: ``--profile`` (or its variable), the daemon's.
    source: str = ""
    #: Each profile's thread ``config`` (the profile, the ``-c`` overrides over it).
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What cannot be used: files that are no profile, keys no thread's config changes.
    warnings: tuple[str, ...] = ()

    def says(self) -> str:
        """One line: the profile in force and its file."""
        if self.profile is None:
            return "none (config.toml alone)"
        return f"{self.profile} ({self.path}; from {self.source})"


def profile_path(codex_home: Path | str, name: str) -> Path:
    """The file of profile ``name``."""
    return Path(codex_home) / f"{name}{SUFFIX}"


def check_name(name: str) -> None:
    """Refuse a name that is not one of a profile: letters, digits, ``_``, ``.`` and
    ``-``, a letter or digit first (no path, nothing a client could mistake for the
    ``profile`` option's "none")."""
    if not re.fullmatch(r"\w[\w.-]*", name):
        raise ProfileError(
            f"{name!r} is not a profile name (letters, digits, _ . -; the file NAME{SUFFIX} "
            "in CODEX_HOME)"
        )


def load_profile(codex_home: Path | str, name: str) -> Profile:
    """Profile ``name`` of ``codex_home``; ``ProfileError`` naming the file when it is
    missing, unreadable or no TOML."""
    check_name(name)
    path = profile_path(codex_home, name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"profile {name!r}: no file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ProfileError(f"profile {name!r}: cannot read {path}: {why}") from None
    import tomllib  # here: most starts have no profile, and tomllib costs ~10 ms to import

    try:
        return Profile(name, path, tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {name!r}: {path} is not TOML: {exc}") from None


def find_profiles(codex_home: Path | str) -> tuple[list[Profile], list[ProfileError]]:
    """Every profile of ``codex_home`` (by name), and why each file that is not one could
    not be read. No ``CODEX_HOME``: none."""
    try:
        names = sorted(
            p.name.removesuffix(SUFFIX)
            for p in Path(codex_home).iterdir()
            if p.name.endswith(SUFFIX) and p.is_file()
        )
    except OSError:
        return [], []
    found: list[Profile] = []
    failed: list[ProfileError] = []
    for name in names:
        try:
            found.append(load_profile(codex_home, name))
        except ProfileError as exc:
            failed.append(exc)
    return found, failed


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``table`` as dotted keys to its values (lists and scalars); a table whose keys hold a
    dot (which Codex would split) is kept whole under its own key, as is an empty table."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and all("." not in k for k in value):
            flat.update(flatten(value, f"{path}."))
        else:
            flat[path] = copy.deepcopy(value)
    return flat


def layer(profile: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The ``config`` of a thread: ``profile`` (a parsed profile file) as dotted keys, the
    ``-c`` ``overrides`` (dotted keys already) over it, whatever order Codex applies the
    keys in: a profile key an override covers (or turns into a table) is left out, and an
    override that falls inside a table the profile sends whole is set in that table. Keys
    Codex reads only at its start are left out (no thread's ``config`` changes them)."""
    layered = {
        key: value
        for key, value in flatten(profile).items()
        if key.split(".")[0] not in PROCESS_WIDE_KEYS
    }
    rest: dict[str, Any] = {}
    for override, value in overrides.items():
        for key in [k for k in layered if k == override or k.startswith(f"{override}.")]:
            del layered[key]
        holder = next((k for k in layered if override.startswith(f"{k}.")), None)
        if holder is not None and not isinstance(layered[holder], dict):
            del layered[holder]  # a value the override turns into a table
            holder = None
        if holder is None:
            rest[override] = copy.deepcopy(value)
            continue
        table = layered[holder]
        *inner, last = override[len(holder) + 1 :].split(".")
        for part in inner:
            below = table.get(part)
            if not isinstance(below, dict):
                below = table[part] = {}
            table = below
        table[last] = copy.deepcopy(value)
    return {**layered, **rest}

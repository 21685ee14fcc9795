"""Write a ``CODEX_HOME`` that points the real Codex at the scripted model.

Codex reads ``$CODEX_HOME/config.toml`` at start-up. The file written here selects a custom model
provider (``mock``) whose ``base_url`` is the scripted model, turns off what would reach the network
(update checks, analytics, plugins) and the login shell Codex runs at each thread's start and for
each command, and
disables retries, so that a scripted failure fails the turn at once instead of being replayed
against the same script.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["codex_config", "write_codex_home"]


def codex_config(model_base_url: str) -> dict[str, Any]:
    """The default configuration, as the nested dict that ``config.toml`` holds."""
    return {
        "model": "mock-model",
        "model_provider": "mock",
        "approval_policy": "on-request",
        "sandbox_mode": "workspace-write",
        "check_for_update_on_startup": False,
        # Commands run with ``bash -c``, not the login shell: a profile that runs a tool of
        # its own at every start (pyenv's rehash, which waits up to a minute on a lock that a
        # killed shell left) would hold every command of the tests and the demo.
        "allow_login_shell": False,
        "analytics": {"enabled": False},
        # No shell snapshot: at every thread's start Codex would run the user's login shell
        # (``bash -lc``, their whole profile) to capture its environment, which costs more
        # CPU than the rest of the thread's start; commands run without it all the same.
        "features": {"plugins": False, "shell_snapshot": False},
        "model_providers": {
            "mock": {
                "name": "mock",
                "base_url": model_base_url,
                "wire_api": "responses",
                # A retry would replay the same scripted reply: `@@ fail` must fail the turn.
                "request_max_retries": 0,
                "stream_max_retries": 0,
                "supports_websockets": False,
            }
        },
    }


def write_codex_home(codex_home: Path, model_base_url: str, *, extra_toml: str = "") -> Path:
    """Create ``codex_home`` (if needed) and write its ``config.toml``; return the config path.

    ``model_base_url`` is the provider's base URL, ending in ``/v1`` (``ScriptedModel.base_url``).
    ``extra_toml`` is TOML merged over the defaults (tables key by key, other values replace them),
    e.g. ``'approval_policy = "never"\\n[tools]\\nupdate_plan = { enabled = true }'``.
    """
    config = codex_config(model_base_url)
    if extra_toml:
        _merge(config, tomllib.loads(extra_toml))
    codex_home.mkdir(parents=True, exist_ok=True)
    config_path = codex_home / "config.toml"
    text = "# Written by bridge.scripted_model.write_codex_home: Codex against a scripted model.\n"
    config_path.write_text(text + _dump_toml(config), encoding="utf-8")
    return config_path


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _value(value: object) -> str:
    # Check bool before int: bool is a subclass of int.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # With ensure_ascii, JSON escapes are a subset of TOML basic-string escapes.
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to config.toml")


def _dump_toml(table: dict[str, Any], path: tuple[str, ...] = ()) -> str:
    """Scalars of a table first, then each sub-table under its own ``[dotted.header]``."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    subtables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    text = ""
    # A table holding only sub-tables needs no header of its own: theirs define it.
    if path and (lines or not subtables):
        text += f"\n[{'.'.join(_key(part) for part in path)}]\n"
    text += "".join(line + "\n" for line in lines)
    for key, value in subtables:
        text += _dump_toml(value, (*path, key))
    return text

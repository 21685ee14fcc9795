"""The ready-made files in ``contrib/``: the ACP registry entry and the editor configurations.

The registry entry is validated against the registry's own schema (a copy: see
``tests/schemas/SOURCE.md``) and must name this package's version. The editor files are
checked lightly: each JSON file parses and launches ``codex-acp-bridge serve``; the Lua
(Neovim) and Emacs Lisp files are only searched for that command and checked for balanced
brackets, since no Neovim or Emacs runs here. The acpx file is also run for real, through
acpx, by ``tests/test_e2e_acpx.py``. The last test runs the real bridge with the handshake
the registry's CI sends, to see that the bridge passes the registry's authentication check.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import jsonschema
import pytest
import trio

from bridge import __version__
from tests.conftest import REPO
from tests.support.e2e import SCENARIO_SECONDS, running_bridge

CONTRIB = REPO / "contrib"
REGISTRY_ENTRY = CONTRIB / "acp-registry" / "agent.json"
REGISTRY_SCHEMA = REPO / "tests" / "schemas" / "acp-registry" / "agent.schema.json"
COMMAND = "codex-acp-bridge"


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _jsonc(text: str) -> Any:
    """Parse JSON with comments and trailing commas, as Zed's settings.json allows."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif c in "}]":
            while out and out[-1].isspace():
                out.pop()
            if out and out[-1] == ",":
                out.pop()
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return json.loads("".join(out))


def _balanced(text: str, comment: str) -> bool:
    """Whether ``()[]{}`` pair up outside strings and ``comment``-to-end-of-line comments."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith(comment, i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == '"' or (c == "'" and comment == "--"):  # Lua has '...' strings; Lisp quotes
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            stack.append(c)
        elif c in pairs and (not stack or stack.pop() != pairs[c]):
            return False
        i += 1
    return not stack


# -- the ACP registry entry ------------------------------------------------------------------


def test_registry_entry_validates_against_the_registry_schema() -> None:
    schema = _load(REGISTRY_SCHEMA)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    entry = _load(REGISTRY_ENTRY)
    assert [e.message for e in validator.iter_errors(entry)] == []
    # What the schema leaves to the registry's CI (its CONTRIBUTING.md): the folder is named
    # after the id, the repository is a URL, the license an SPDX identifier.
    assert entry["id"] == COMMAND
    url = urlparse(entry["repository"])
    assert (url.scheme, url.netloc) == ("https", "github.com")
    assert entry["repository"] == "https://github.com/codex-acp-bridge/codex-acp-bridge"
    assert entry["license"] == "Apache-2.0"


def test_registry_entry_pins_this_version_and_serves() -> None:
    entry = _load(REGISTRY_ENTRY)
    assert entry["version"] == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", entry["version"])  # the registry's x.y.z rule
    assert list(entry["distribution"]) == ["uvx"]
    uvx = entry["distribution"]["uvx"]
    assert uvx["package"] == f"{COMMAND}=={__version__}"
    assert uvx["args"][0] == "serve"


def test_registry_readme_says_how_to_submit_and_which_sign_ins() -> None:
    text = (CONTRIB / "acp-registry" / "README.md").read_text(encoding="utf-8")
    assert "agentclientprotocol/registry" in text
    assert "codex-acp-bridge/agent.json" in text
    assert "agent auth" in text and "terminal auth" in text
    assert "codex-acp-bridge login" in text


# -- editor configurations ----------------------------------------------------------------------


def _zed(config: Any) -> list[tuple[str, list[str]]]:
    return [(s["command"], s["args"]) for s in config["agent_servers"].values()]


def _jetbrains(config: Any) -> list[tuple[str, list[str]]]:
    servers = config["agent_servers"]
    for server in servers.values():
        # JetBrains' documented format: command, args, env (strings only).
        assert set(server) <= {"command", "args", "env"}, server
        assert all(isinstance(v, str) for v in server.get("env", {}).values())
    return [(s["command"], s["args"]) for s in servers.values()]


def _acpx(config: Any) -> list[tuple[str, list[str]]]:
    agents = config["agents"]
    # acpx refuses an entry mixing `argv` with `command`/`args`.
    assert all(set(agent) == {"argv"} for agent in agents.values()), agents
    return [(a["argv"][0], a["argv"][1:]) for a in agents.values()]


JSON_FILES = {
    "zed/settings.json": (_jsonc, _zed),
    "zed/settings-attach.json": (_jsonc, _zed),
    "jetbrains/acp.json": (json.loads, _jetbrains),
    "acpx/config.json": (json.loads, _acpx),
}


@pytest.mark.parametrize("name", sorted(JSON_FILES))
def test_json_config_launches_the_bridge(name: str) -> None:
    parse, commands_of = JSON_FILES[name]
    launches = commands_of(parse((CONTRIB / name).read_text(encoding="utf-8")))
    assert launches
    for command, args in launches:
        if name.startswith("zed/"):
            assert Path(command).name == COMMAND  # a clone's .venv/bin/codex-acp-bridge
        else:
            assert command == COMMAND  # on PATH, as pipx or uv tool installs it
        assert args[0] == "serve", args
        assert all(isinstance(a, str) for a in args)


#: Light checks only: no Neovim or Emacs runs here. Each pattern is where the file launches
#: the bridge; the files must also have balanced brackets.
SOURCE_FILES = {
    "neovim/codecompanion.lua": ("--", r'default\s*=\s*\{\s*"codex-acp-bridge",\s*"serve"\s*\}'),
    "neovim/avante.lua": (
        "--",
        r'command\s*=\s*"codex-acp-bridge",\s*args\s*=\s*\{\s*"serve"\s*\}',
    ),
    "emacs/codex-acp-bridge-agent-shell.el": (";", r"'\(\"codex-acp-bridge\"\s+\"serve\"\)"),
}


@pytest.mark.parametrize("name", sorted(SOURCE_FILES))
def test_editor_source_launches_the_bridge(name: str) -> None:
    comment, launch = SOURCE_FILES[name]
    text = (CONTRIB / name).read_text(encoding="utf-8")
    assert re.search(launch, text), f"{name} does not launch `codex-acp-bridge serve`"
    assert _balanced(text, comment), f"{name} has unbalanced brackets"
    # Each file cites the upstream documentation or source it follows.
    assert "Followed" in text and "https://github.com/" in text


def test_contrib_readme_lists_every_file() -> None:
    readme = (CONTRIB / "README.md").read_text(encoding="utf-8")
    files = [
        p.relative_to(CONTRIB).as_posix()
        for p in CONTRIB.rglob("*")
        if p.is_file() and p.name != "README.md"
    ]
    assert files
    assert [f for f in files if f"({f})" not in readme] == []


# -- the registry's authentication check, against the real bridge --------------------------------

#: The ``initialize`` the registry's CI sends (``.github/workflows/client.py`` of
#: agentclientprotocol/registry at 3de1678).
REGISTRY_CHECK_CAPABILITIES = {
    "terminal": True,
    "fs": {"readTextFile": True, "writeTextFile": True},
    "_meta": {"terminal_output": True, "terminal-auth": True},
}


def _registry_types(methods: list[dict[str, Any]]) -> dict[str, str]:
    """Each method's type as the registry's CI reads it: ``type``, else ``_meta``, else agent."""
    types = {}
    for method in methods:
        kind = method.get("type")
        meta = method.get("_meta") or {}
        if not kind:
            kind = "terminal" if "terminal-auth" in meta else "agent"
        types[method["id"]] = kind
    return types


@pytest.mark.e2e
async def test_bridge_passes_the_registry_authentication_check(
    bridge_argv: list[str], bridge_env: dict[str, str], stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            registry = await client.initialize(REGISTRY_CHECK_CAPABILITIES)
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            terminal = await client.initialize(
                {**REGISTRY_CHECK_CAPABILITIES, "auth": {"terminal": True}}
            )
    # The registry lists an agent when one method is of type agent or terminal; its handshake
    # declares _meta["terminal-auth"], so it is shown both.
    types = _registry_types(registry["authMethods"])
    assert types["chatgpt"] == "agent" and types["codex-login"] == "terminal"
    # A client that can run a terminal (ACP's auth.terminal) is offered the bridge's login too.
    [login] = [m for m in terminal["authMethods"] if m.get("type") == "terminal"]
    assert login["args"] == ["--login"]

"""acpx, a headless ACP command-line client, set up to run this bridge."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import REPO

ACPX = REPO / "tools" / "node" / "node_modules" / ".bin" / "acpx"
CONFIG = REPO / "contrib" / "acpx" / "config.json"


def write_acpx_home(home: Path, log: Path, *serve_options: str) -> str:
    """Writes ``home/.acpx/config.json``: the agent of contrib/acpx/config.json, its command
    ``codex-acp-bridge serve`` this Python's ``-m bridge serve`` with ``serve_options`` and a
    log file ``log``. Returns the agent's name."""
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    [(name, entry)] = config["agents"].items()
    assert entry["argv"][:2] == ["codex-acp-bridge", "serve"]
    entry["argv"] = [
        sys.executable,
        "-m",
        "bridge",
        *entry["argv"][1:],
        *serve_options,
        "--log-level",
        "info",
        "--log-file",
        str(log),
    ]
    (home / ".acpx").mkdir(parents=True)
    (home / ".acpx" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return name

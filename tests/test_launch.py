"""The command's entry point: where Python writes no bytecode and the package has none, a
start compiles the bridge once into a cache of its own, never into the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bridge

PACKAGE = Path(bridge.__file__).parent

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def uncompiled(tmp_path: Path) -> Path:
    """A copy of the package as ``uv`` installs it: no ``__pycache__`` anywhere."""
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "bridge", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def run_version(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # -P: the working directory is not on the path; the copy is found first.
    argv = [sys.executable, "-P", "-m", "bridge", "--version"]
    full = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    full.update(PYTHONPATH=str(root), **env)
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=60, check=True)


def pycs(root: Path) -> list[Path]:
    return sorted(root.rglob("*.pyc"))


def test_without_bytecode_writing_the_bridge_compiles_into_its_own_cache_once(
    uncompiled: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    env = {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(cache)}
    assert "codex-acp-bridge" in run_version(uncompiled, env).stdout
    cached = pycs(cache / "codex-acp-bridge" / "bytecode")
    # What the command imported (the CLI) is cached, mirrored under the source's path...
    cli = [p for p in cached if p.name.startswith("cli.")]
    assert cli, cached
    assert str(uncompiled / "bridge" / "__pycache__") not in str(cli[0])
    assert str(uncompiled) in str(cli[0])
    # ...and nothing is written beside the package's sources.
    assert pycs(uncompiled) == []
    # The next start reads the cache: nothing is compiled again.
    before = {p: p.stat().st_mtime_ns for p in cached}
    run_version(uncompiled, env)
    assert {p: p.stat().st_mtime_ns for p in pycs(cache)} == before


def test_the_cache_can_be_turned_off(uncompiled: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {
        "PYTHONDONTWRITEBYTECODE": "1",
        "XDG_CACHE_HOME": str(cache),
        "CODEX_ACP_BRIDGE_BYTECODE": "never",
    }
    run_version(uncompiled, env)
    assert not cache.exists()
    assert pycs(uncompiled) == []


def test_a_package_with_its_bytecode_or_a_python_that_writes_it_is_left_alone(
    uncompiled: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    # Python writes bytecode: the usual __pycache__ beside the sources, no cache of ours.
    run_version(uncompiled, {"XDG_CACHE_HOME": str(cache)})
    assert any(p.name.startswith("cli.") for p in pycs(uncompiled))
    assert not cache.exists()
    # Compiled now (as pip compiles at install): with writing off, still nothing of ours.
    run_version(uncompiled, {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(cache)})
    assert not cache.exists()


def test_a_session_that_names_no_machine_starts_without_websockets() -> None:
    """``serve`` with no machine (no links made, the bridge run without them) imports neither
    ``websockets`` nor ``asyncio`` under it: a tenth of a second of CPU at every start, which
    every editor's new thread and every end-to-end test pays."""
    code = """
import sys
from bridge.cli import main
from bridge.codex_choice import CodexChoice, ServeOptions
from bridge.serve import make_links
from bridge.shell import early, run_bridge, stdio
assert make_links(ServeOptions(), CodexChoice(None, "Codex: its own")) is None
print(sorted(m for m in sys.modules if m.split(".")[0] in ("websockets", "asyncio")))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout

"""The coverage floor on ``bridge/engine``: the engine's tests, run under coverage, reach it.

The floor (``fail_under``) and the source measured are in pyproject.toml's ``[tool.coverage]``.
The whole suite does not run under coverage (a tracer doubles what the in-process tests cost);
this test runs the engine's tests again under it, in a pytest of their own, traced while the
tests run and not while pytest works around them (:mod:`tests.support.engine_coverage`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: What makes a test file one of the engine's: it drives the engine in this process.
DRIVES_ENGINE = (
    "tests.support.engine_harness",
    "from bridge.engine",
    "from bridge.recording import",
)
#: Left out: end-to-end tests run the engine in a bridge subprocess, which is not measured;
#: property tests run the same code many times over, slowly under a tracer, for no new line.
NOT_HERE = ("pytest.mark.e2e", "from hypothesis", "import hypothesis")


def engine_tests() -> list[Path]:
    found = []
    for path in sorted((REPO / "tests").glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        if any(s in text for s in DRIVES_ENGINE) and not any(s in text for s in NOT_HERE):
            found.append(path)
    return found


def test_the_engine_tests_are_found() -> None:
    names = {path.name for path in engine_tests()}
    assert {"test_engine.py", "test_v2.py", "test_replay.py", "test_workstate.py"} <= names
    assert not any(name.startswith("test_e2e") for name in names)


def test_the_engine_tests_cover_the_engine_up_to_the_floor(tmp_path: Path) -> None:
    floor = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["coverage"]["report"][
        "fail_under"
    ]
    # The run's own coverage data file, and nothing of an outer run (xdist's or coverage's).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    env["COVERAGE_FILE"] = str(tmp_path / ".coverage")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    argv += ["-p", "no:pytest_cov", "-p", "tests.support.engine_coverage"]
    argv += list(map(str, engine_tests()))
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=540, check=False
    )
    total = re.search(r"^TOTAL\s.*?(\d+(?:\.\d+)?)%\s*$", done.stdout, flags=re.MULTILINE)
    assert total, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"bridge/engine covered by its tests: {total.group(1)} % (floor {floor} %)")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert float(total.group(1)) >= floor

"""The generated list of Codex methods matches the schemas it was generated from."""

from __future__ import annotations

import subprocess
import sys

from bridge.codex.methods import SERVER_NOTIFICATIONS, SERVER_REQUESTS
from tests.conftest import REPO


def test_generated_codex_methods_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_codex_methods.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_methods_the_engine_handles_are_ones_codex_sends() -> None:
    from bridge.codex.messages import NOTIFICATIONS, REQUESTS, RETIRED_REQUESTS
    from bridge.engine import Engine

    assert set(NOTIFICATIONS) <= SERVER_NOTIFICATIONS, set(NOTIFICATIONS) - SERVER_NOTIFICATIONS
    # Beside those, only what an older Codex still sends.
    assert set(REQUESTS) - RETIRED_REQUESTS <= SERVER_REQUESTS, set(REQUESTS) - SERVER_REQUESTS
    assert not RETIRED_REQUESTS & SERVER_REQUESTS, "the pinned Codex sends it: not retired"
    # Every method that has a type is routed, and nothing is routed without a type.
    engine = Engine()
    # (observers hear a method before the session gate: thread/started has no other route)
    assert set(engine._notifications) | set(engine._observers) == set(NOTIFICATIONS)
    assert set(engine._codex_requests) == set(REQUESTS)

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
    routes = Engine().codex_router.routes
    assert {m for m, route in routes.items() if route.answer is None} == set(NOTIFICATIONS)
    assert {m for m, route in routes.items() if route.answer is not None} == set(REQUESTS)


def test_each_route_names_the_type_its_messages_decode_into() -> None:
    from bridge.codex.messages import params_type
    from bridge.engine import Engine

    routes = Engine().codex_router.routes
    assert {m: r.params for m, r in routes.items()} == {m: params_type(m) for m in routes}

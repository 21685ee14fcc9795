#!/usr/bin/env python3
"""Write bridge/codex/methods.py from the Codex schemas in tests/schemas/codex/.

    .venv/bin/python scripts/generate_codex_methods.py          # rewrite the module
    .venv/bin/python scripts/generate_codex_methods.py --check  # exit 1 if it is out of date

The methods are the union over both bundles Codex generates (the v2 protocol and
the full one with legacy methods), of the pinned Codex (``tests/schemas/codex/``) and of
the oldest tested one (``tests/schemas/codex/0.169/``): anything either version may send,
since users run both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "tests" / "schemas" / "codex"
SCHEMAS = sorted(STORED.glob("*.json")) + sorted((STORED / "0.169").glob("*.json"))
TARGET = ROOT / "bridge" / "codex" / "methods.py"


def methods(kind: str) -> list[str]:
    found: set[str] = set()
    for path in SCHEMAS:
        schema = json.loads(path.read_text())
        union = schema.get(kind) or schema.get("definitions", {}).get(kind)
        for variant in (union or {}).get("oneOf", []):
            found.update(variant["properties"]["method"]["enum"])
    return sorted(found)


def render() -> str:
    def block(name: str, items: list[str]) -> list[str]:
        return [
            f"{name}: frozenset[str] = frozenset(",
            "    {",
            *[f'        "{m}",' for m in items],
            "    }",
            ")",
        ]

    lines = [
        '"""The methods Codex app-server 0.169 to 0.171 can send. Generated: do not edit.',
        "",
        "Written by ``scripts/generate_codex_methods.py`` from the schemas Codex generates",
        "(``tests/schemas/codex/``, the pinned version's, and ``tests/schemas/codex/0.169/``):",
        "the union, since users run both. ``tests/test_codex_methods.py`` fails when they drift",
        "apart. The replay refuses a recording holding a message Codex never sends.",
        '"""',
        "",
        'CODEX_VERSION = "0.171.0"',
        "",
        *block("SERVER_NOTIFICATIONS", methods("ServerNotification")),
        "",
        *block("SERVER_REQUESTS", methods("ServerRequest")),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(
                f"{TARGET.relative_to(ROOT)} is out of date: run {Path(__file__).name}",
                file=sys.stderr,
            )
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""JetBrains AIR's extensions as a test declares and expects them (``_meta.jetbrains.air``)."""

from __future__ import annotations

from typing import Any

#: What the bridge offers every AIR client, whatever it declared.
ALWAYS = [
    "agentFileChangeReport",
    "asyncTasks",
    "sessionFailure",
    "diffPatch",
    "nativeSubagentSessions",
    "recommendedValue",
]


def declaring(*capabilities: str) -> dict[str, Any]:
    """``initialize``'s client capabilities of an AIR client (version 1) that declares
    ``capabilities``."""
    return {"_meta": {"jetbrains": {"air": {"version": 1, "capabilities": list(capabilities)}}}}

"""The steering extension: input injected into the turn that is running.

``_session/steering`` is an ACP extension request (an underscore method), used by ACP
clients and hosts to add to what the agent is working on without waiting for its turn to
end. Params: ``{sessionId, prompt: ContentBlock[], _meta?: {steering: {idleBehavior:
"promptRequired"}}}``; result: ``{outcome: "injected" | "promptRequired" | "startedNewTurn"
| "failed", reason?}``. Agents that take it say so in ``initialize``:
``_meta.steering.supported: true``. Same conventions as :mod:`bridge.acp.types`.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..wire import WireStruct as _Base

METHOD = "_session/steering"

Outcome: TypeAlias = Literal["injected", "promptRequired", "startedNewTurn", "failed"]


class SteeringParams(_Base):
    sessionId: str
    prompt: list[Raw]
    meta: dict[str, Any] | None | UnsetType = msgspec.field(default=UNSET, name="_meta")

    @property
    def prompt_required(self) -> bool:
        """The client asked for ``promptRequired`` rather than a new turn when idle."""
        steering = self.meta.get("steering") if isinstance(self.meta, dict) else None
        return isinstance(steering, dict) and steering.get("idleBehavior") == "promptRequired"


class SteeringResult(_Base):
    outcome: Outcome
    reason: str | UnsetType = UNSET


#: ``initialize``'s ``_meta`` member saying the agent takes steering requests.
SUPPORTED = {"steering": {"supported": True}}

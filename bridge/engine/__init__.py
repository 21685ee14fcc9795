"""The pure core: no I/O, no trio, no clock. See :mod:`bridge.engine.engine`."""

from .core.effects import Effect, ReadClock, ToClient, ToCodex
from .engine import AGENT_NAME, Engine

__all__ = ["AGENT_NAME", "Effect", "Engine", "ReadClock", "ToClient", "ToCodex"]

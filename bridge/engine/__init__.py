"""The pure core: no I/O, no trio, no clock. See :mod:`bridge.engine.engine`."""

from .core.effects import (
    Effect,
    MachineCall,
    MachineChosen,
    MachineReleased,
    MachineWanted,
    ReadClock,
    ToClient,
    ToCodex,
)
from .core.machines import MachineOffer, Registration
from .engine import AGENT_NAME, Engine

__all__ = [
    "AGENT_NAME",
    "Effect",
    "Engine",
    "MachineCall",
    "MachineChosen",
    "MachineOffer",
    "MachineReleased",
    "MachineWanted",
    "ReadClock",
    "Registration",
    "ToClient",
    "ToCodex",
]

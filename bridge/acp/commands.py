"""ACP v1 messages for slash commands (``available_commands_update``). Same conventions as
:mod:`bridge.acp.types`: wire names, ``UNSET`` for absent, unknown fields
ignored on decode.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base

# -- slash commands ---------------------------------------------------------------------


class UnstructuredCommandInput(_Base):
    hint: str


class AvailableCommand(_Base):
    name: str
    description: str
    input: UnstructuredCommandInput | None | UnsetType = UNSET
    meta: dict[str, Any] | None | UnsetType = msgspec.field(default=UNSET, name="_meta")


class AvailableCommandsUpdate(_Base, tag="available_commands_update", tag_field="sessionUpdate"):
    availableCommands: list[AvailableCommand]

"""ACP v1 messages for slash commands (``available_commands_update``). Same conventions as
:mod:`bridge.acp.types`: wire names, ``UNSET`` for absent, unknown fields
ignored on decode.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType


class _Base(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


# -- slash commands ---------------------------------------------------------------------


class UnstructuredCommandInput(_Base):
    hint: str


class AvailableCommand(_Base):
    name: str
    description: str
    input: UnstructuredCommandInput | None | UnsetType = UNSET


class AvailableCommandsUpdate(_Base, tag="available_commands_update", tag_field="sessionUpdate"):
    availableCommands: list[AvailableCommand]

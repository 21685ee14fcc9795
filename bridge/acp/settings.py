"""ACP v1 messages for a session's settings: modes (``modes``, ``session/set_mode``,
``current_mode_update``) and config options (``configOptions``,
``session/set_config_option``, ``config_option_update``). Same conventions as
:mod:`bridge.acp.types`: wire names, ``UNSET`` for absent, unknown fields
ignored on decode.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .types import Meta

# -- modes -------------------------------------------------------------------------


class SessionMode(_Base):
    id: str
    name: str
    description: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class SessionModeState(_Base):
    currentModeId: str
    availableModes: list[SessionMode]


class SetSessionModeParams(_Base):
    sessionId: str
    modeId: str


class SetSessionModeResult(_Base):
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class CurrentModeUpdate(_Base, tag="current_mode_update", tag_field="sessionUpdate"):
    currentModeId: str


# -- config options ------------------------------------------------------------------


class SessionConfigSelectOption(_Base):
    value: str
    name: str
    description: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class SessionConfigSelect(_Base, tag="select", tag_field="type"):
    """A dropdown: the only kind of option this bridge offers (``boolean`` needs a client
    capability and nothing in Codex's per-turn settings is a toggle)."""

    id: str
    name: str
    currentValue: str
    options: list[SessionConfigSelectOption]
    description: str | None | UnsetType = UNSET
    category: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class SetSessionConfigOptionParams(_Base):
    sessionId: str
    configId: str
    # A value id (string) for a select; ``type: "boolean"`` with a bool for a toggle.
    value: Any
    type: str | UnsetType = UNSET


class SetSessionConfigOptionResult(_Base):
    configOptions: list[SessionConfigSelect]


class ConfigOptionUpdate(_Base, tag="config_option_update", tag_field="sessionUpdate"):
    configOptions: list[SessionConfigSelect]

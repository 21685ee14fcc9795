"""ACP v1 messages for a session's settings, commands and authentication.

Modes (``modes``, ``session/set_mode``, ``current_mode_update``), session
config options (``configOptions``, ``session/set_config_option``,
``config_option_update``), slash commands (``available_commands_update``) and
``authenticate`` with its URL elicitation. Same conventions as
:mod:`bridge.acp.types`: wire names, ``UNSET`` for absent, unknown fields
ignored on decode.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..jsonrpc import RequestId
from .types import Meta


class _Base(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


# -- modes -------------------------------------------------------------------------


class SessionMode(_Base):
    id: str
    name: str
    description: str | None | UnsetType = UNSET


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


class SessionConfigSelect(_Base, tag="select", tag_field="type"):
    """A dropdown: the only kind of option this bridge offers (``boolean`` needs a client
    capability and nothing in Codex's per-turn settings is a toggle)."""

    id: str
    name: str
    currentValue: str
    options: list[SessionConfigSelectOption]
    description: str | None | UnsetType = UNSET
    category: str | None | UnsetType = UNSET


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


# -- slash commands ---------------------------------------------------------------------


class UnstructuredCommandInput(_Base):
    hint: str


class AvailableCommand(_Base):
    name: str
    description: str
    input: UnstructuredCommandInput | None | UnsetType = UNSET


class AvailableCommandsUpdate(_Base, tag="available_commands_update", tag_field="sessionUpdate"):
    availableCommands: list[AvailableCommand]


# -- authentication ------------------------------------------------------------------------


class AuthenticateParams(_Base):
    methodId: str


class AuthenticateResult(_Base):
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class UrlElicitationParams(_Base):
    """``elicitation/create`` in URL mode, scoped to a request outside any session
    (here: the ``authenticate`` the user is waiting on)."""

    mode: str  # "url"
    elicitationId: str
    url: str
    message: str
    requestId: RequestId


class ElicitationResult(_Base):
    action: str


class CompleteElicitationParams(_Base):
    elicitationId: str

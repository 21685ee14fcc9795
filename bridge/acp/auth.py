"""ACP v1 messages for ``authenticate`` and its URL elicitation. Same conventions as
:mod:`bridge.acp.types`: wire names, ``UNSET`` for absent, unknown fields
ignored on decode.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from ..jsonrpc import RequestId
from ..wire import WireStruct as _Base
from .types import Meta

#: Where an OpenAI API key for Codex is read from, in order (the bridge's environment): the
#: ``api-key`` sign-in hands it to Codex, and ``doctor`` counts it as credentials.
API_KEY_VARIABLES = ("CODEX_API_KEY", "OPENAI_API_KEY")


# -- authentication ------------------------------------------------------------------------


class AuthenticateParams(_Base):
    methodId: str


class AuthenticateResult(_Base):
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class LogoutResult(_Base):
    """``logout``'s answer (v2's ``auth/logout`` too): ``{}``."""

    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- the sign-in state (unstable) ----------------------------------------------------------------

#: The request that asks it, and the notification that tells it changed.
STATUS = "auth/status"
STATUS_UPDATE = "auth/status_update"


class AuthAccount(_Base):
    """An account or credential, for display only."""

    label: str
    active: bool | None | UnsetType = UNSET
    email: str | None | UnsetType = UNSET
    organization: str | None | UnsetType = UNSET


class AuthStatus(_Base):
    """``auth/status``'s answer and ``auth/status_update``'s params: ``authenticated``,
    ``unauthenticated``, ``not_required`` or ``unknown``, and the accounts behind it."""

    state: str
    accounts: list[AuthAccount] | UnsetType = UNSET


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

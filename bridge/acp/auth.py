"""ACP v1 messages for ``authenticate`` and its URL elicitation. Same conventions as
:mod:`bridge.acp.types`: wire names, ``UNSET`` for absent, unknown fields
ignored on decode.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

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

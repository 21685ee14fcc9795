"""Codex app-server ``account/*`` login messages. Same conventions as
:mod:`bridge.codex.types`.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base

# -- the account -------------------------------------------------------------------------------


class ApiKeyLogin(_Base, tag="apiKey", tag_field="type"):
    apiKey: str


class ChatgptLogin(_Base, tag="chatgpt", tag_field="type"):
    pass


class LoginAccountResult(_Base):
    type: str
    #: ChatGPT: the page that signs the user in; Codex listens for its callback itself.
    authUrl: str | UnsetType = UNSET
    loginId: str | UnsetType = UNSET


class CancelLoginAccountParams(_Base):
    loginId: str


class AccountLoginCompleted(_Base):
    success: bool
    loginId: str | None = None
    error: str | None = None

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


class AccountUpdated(_Base):
    """``account/updated``: Codex's credentials changed (a sign-in, a sign-out, its own
    refresh). ``authMode`` ``None``: signed out; the rest is read with ``account/read``."""

    authMode: str | None = None
    planType: str | None = None


# -- what the account's use cost ---------------------------------------------------------------


class AccountUsageReadParams(_Base):
    """``account/usage/read``: for one thread (its estimated cost) rather than the account."""

    threadId: str


class ThreadUsage(_Base):
    #: Codex's estimate of what the thread cost so far; ``None``: not known, not zero.
    estimatedUsageUsdMicros: int | None = None


class AccountUsageReadResult(_Base):
    #: ``None`` when the thread's billing route is not available.
    threadUsage: ThreadUsage | None = None

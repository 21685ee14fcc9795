"""Authentication: the ``authMethods`` offered, ``authenticate``, the sign-in state,
and telling a failed turn that lacks credentials apart.

``authMethods``: Codex's own ChatGPT sign-in (``account/login/start`` type
``chatgpt``; the sign-in page reaches the user as a URL elicitation tied to the
``authenticate`` request, or, for a client without URL elicitation, in the
error's message) and an API key from the bridge's environment
(``CODEX_API_KEY`` or ``OPENAI_API_KEY``, handed to Codex with
``account/login/start`` type ``apiKey``; the engine never reads the
environment itself: the shell passes the key in). A turn that fails for lack of
credentials fails its prompt with ACP's ``auth_required`` (-32000): see
:func:`bridge.engine.features.prompts._turn_errors.lacks_credentials`.

The sign-in state (ACP's unstable ``auth/status``, advertised as ``auth.status`` to a
client of the unstable schema, every v2 client among them) is Codex's ``account/read``:
an account is ``authenticated`` (ChatGPT with its email and plan, an API key, a cloud's
credentials), none ``unauthenticated`` where the provider needs an OpenAI sign-in and
``not_required`` where it does not; Codex unable to answer, ``unknown`` (never an error:
the client asks to learn whether to sign in). Codex tells every connection when its
credentials change (``account/updated``: a sign-in, a sign-out, here or in another
window of a shared Codex); the state is read again and ``auth/status_update`` sent when
it differs from the last one the client was given.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from ....acp import auth as acp_auth
from ....acp import types as acp_types
from ....codex import account as codex_account
from ....codex import palette as codex_palette
from ....jsonrpc import ErrorCode, RequestId, RpcError
from ...core import exchanges
from ...core.answers import decode_params
from ...core.exchanges import Ask, Exchange, Refused, Steps
from ...core.hub import Hub

log = logging.getLogger(__name__)

CHATGPT_METHOD = "chatgpt"
API_KEY_METHOD = "api-key"

TERMINAL_METHOD = "codex-login"

#: What the client runs the bridge with, appended to its usual command, to sign in
#: in a terminal: ``serve --login`` runs Codex's own ``codex login`` and exits.
TERMINAL_ARGS = ("--login",)

AUTH_METHODS: tuple[acp_types.AuthMethod, ...] = (
    acp_types.AuthMethod(
        id=CHATGPT_METHOD,
        name="Sign in with ChatGPT",
        description="Use your ChatGPT plan, through Codex's own sign-in in the browser.",
    ),
    acp_types.AuthMethod(
        id=API_KEY_METHOD,
        name="API key from the environment",
        description="Use the OpenAI API key in CODEX_API_KEY or OPENAI_API_KEY "
        "where the bridge runs.",
        type="env_var",
        vars=[acp_types.AuthEnvVar(name="OPENAI_API_KEY", label="OpenAI API key", secret=True)],
    ),
)

#: Offered only to a client that can run the agent in a terminal (``auth.terminal``).
TERMINAL_AUTH = acp_types.AuthMethod(
    id=TERMINAL_METHOD,
    name="Sign in with ChatGPT in a terminal",
    description="Runs Codex's own sign-in (codex login) in a terminal; on a remote machine "
    "(SSH, no display) it shows a device code to enter at chatgpt.com instead of a browser.",
    type="terminal",
    args=list(TERMINAL_ARGS),
)


@dataclass(slots=True)
class Login:
    """A ChatGPT sign-in: an ``authenticate`` waiting on Codex's ``account/login/completed``."""

    request_id: RequestId
    login_id: str
    elicited: bool = False


class Authentication:
    """``authenticate`` and the ChatGPT sign-in it may start; the sign-in state."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.logins: dict[str, Login] = {}
        #: The sign-in state the client was last given (answered or sent).
        self.told: acp_auth.AuthStatus | None = None

    def advertise(self, result: acp_types.InitializeResult) -> None:
        result.authMethods = self.methods()
        offered: dict[str, Any] = {"logout": {}}
        if self.status_offered:
            offered["status"] = {}
        result.agentCapabilities.auth = offered

    @property
    def status_offered(self) -> bool:
        """``auth/status`` is unstable ACP: advertised (and its update sent) only to a
        client that speaks the unstable schema (:attr:`Hub.speaks_unstable`)."""
        return self.hub.speaks_unstable

    def methods(self) -> list[acp_types.AuthMethod]:
        """The sign-in methods this client is offered: the terminal one only when it can
        run the agent in a terminal (ACP's rule for ``terminal`` methods)."""
        capabilities = self.hub.handshake.client_capabilities
        auth, meta = capabilities.auth, capabilities.meta
        # ACP's auth.terminal, or the earlier _meta["terminal-auth"] that Zed and the
        # registry's checks send.
        terminal = (isinstance(auth, dict) and auth.get("terminal") not in (None, False)) or (
            isinstance(meta, dict) and meta.get("terminal-auth") is True
        )
        return [*AUTH_METHODS, TERMINAL_AUTH] if terminal else list(AUTH_METHODS)

    def authenticate(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_auth.AuthenticateParams, "authenticate")
        if params.methodId == API_KEY_METHOD:
            key = self.hub.setup.api_key
            if not key:
                raise RpcError.invalid_params(
                    "no API key: set CODEX_API_KEY or OPENAI_API_KEY where the bridge runs"
                )
            exchanges.start(self.hub, self._api_key_login(rid, key))
        elif params.methodId == TERMINAL_METHOD:
            # ACP: a terminal method is run by the client, never passed to authenticate.
            raise RpcError.invalid_params(
                f"{TERMINAL_METHOD} is a terminal sign-in: run the agent's command with "
                f"{' '.join(TERMINAL_ARGS)} in a terminal (codex-acp-bridge --login)",
                {"methodId": params.methodId},
            )
        elif params.methodId == CHATGPT_METHOD:
            exchanges.start(self.hub, self._chatgpt(rid))
        else:
            raise RpcError.invalid_params(
                f"unknown auth method {params.methodId!r}; this agent offers "
                f"{', '.join(m.id for m in AUTH_METHODS)}",
                {"methodId": params.methodId},
            )

    def _api_key_login(self, rid: RequestId, key: str) -> Exchange:
        yield Ask("account/login/start", codex_account.ApiKeyLogin(apiKey=key), refuse=rid)
        self.hub.client.answer(rid, acp_auth.AuthenticateResult())

    def _chatgpt(self, rid: RequestId) -> Exchange:
        """Sign in with ChatGPT, unless Codex already is: some clients authenticate with the
        first method on every connection, and a browser sign-in each time helps nobody."""
        try:
            read = yield Ask("account/read", codex_palette.NoParams(), _ACCOUNT)
        except Refused:
            read = None  # not known: sign in
        if read is not None and read.account is not None and read.account.type == "chatgpt":
            log.info("authenticate chatgpt: Codex is signed in already")
            self.hub.client.answer(rid, acp_auth.AuthenticateResult())
            return
        login = Ask("account/login/start", codex_account.ChatgptLogin(), _LOGIN, refuse=rid)
        self._chatgpt_started(rid, (yield login))

    def _chatgpt_started(self, rid: RequestId, started: codex_account.LoginAccountResult) -> None:
        url, login_id = started.authUrl, started.loginId
        if not isinstance(url, str) or not isinstance(login_id, str):
            self.hub.client.refuse(rid, RpcError.internal("Codex started no ChatGPT sign-in"))
            return
        elicitation = self.hub.handshake.client_capabilities.elicitation or {}
        if elicitation.get("url") is None:
            # Without URL elicitation the page can only travel in the answer. Codex keeps
            # waiting for the browser's callback: signing in there is enough.
            self.hub.client.refuse(
                rid,
                RpcError(
                    ErrorCode.AUTH_REQUIRED,
                    f"Open this page in a browser to sign in with ChatGPT, then try again: {url}",
                    {"authUrl": url},
                ),
            )
            return
        login = self.logins[login_id] = Login(request_id=rid, login_id=login_id, elicited=True)
        self.hub.client.request(
            "elicitation/create",
            acp_auth.UrlElicitationParams(
                mode="url",
                elicitationId=login_id,
                url=url,
                message="Sign in with ChatGPT in your browser to let Codex use your plan.",
                requestId=rid,
            ),
            lambda result: self._elicitation_answered(login, result),
            lambda error: self._elicitation_refused(login, error.message),
        )

    def _elicitation_answered(self, login: Login, raw: Raw) -> None:
        try:
            action = msgspec.json.decode(raw, type=acp_auth.ElicitationResult).action
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            action = f"an answer that is not one ({exc})"
        if action != "accept":
            self._elicitation_refused(login, f"the user did not open the sign-in page ({action})")

    def _elicitation_refused(self, login: Login, why: str) -> None:
        if self.logins.pop(login.login_id, None) is None:
            return  # already completed
        exchanges.start(self.hub, _cancel_login(login.login_id))
        self.hub.client.refuse(
            login.request_id, RpcError(ErrorCode.AUTH_REQUIRED, f"ChatGPT sign-in cancelled: {why}")
        )

    def login_completed(self, note: codex_account.AccountLoginCompleted) -> None:
        login = self.logins.pop(note.loginId, None) if note.loginId is not None else None
        if login is None:
            return
        if login.elicited:
            self.hub.client.notify(
                "elicitation/complete",
                acp_auth.CompleteElicitationParams(elicitationId=login.login_id),
            )
        if note.success:
            self.hub.client.answer(login.request_id, acp_auth.AuthenticateResult())
        else:
            message = note.error or "Codex reported no reason"
            self.hub.client.refuse(
                login.request_id,
                RpcError(ErrorCode.AUTH_REQUIRED, f"ChatGPT sign-in failed: {message}"),
            )

    # -- the sign-in state ------------------------------------------------------------------

    def status(self, rid: RequestId, _raw: Raw) -> None:
        """``auth/status``: Codex's ``account/read``, as ACP's state and accounts."""
        exchanges.start(self.hub, self._tell_status(rid))

    def _tell_status(self, rid: RequestId) -> Exchange:
        self.told = yield from _read_status()
        self.hub.client.answer(rid, self.told)

    def account_updated(self, _note: codex_account.AccountUpdated) -> None:
        """Codex's credentials changed: the client that was offered the state is told it
        anew, if it differs from what it was last told."""
        if self.status_offered:
            exchanges.start(self.hub, self._status_changed())

    def _status_changed(self) -> Exchange:
        status = yield from _read_status()
        if status != self.told:
            self.told = status
            self.hub.client.notify(acp_auth.STATUS_UPDATE, status)

    def codex_lost(self, reason: str) -> None:
        logins, self.logins = self.logins, {}
        for login in logins.values():
            self.hub.client.refuse(login.request_id, RpcError.internal(reason))


_ACCOUNT = codex_palette.AccountReadResult
_LOGIN = codex_account.LoginAccountResult


def _read_status() -> Steps[acp_auth.AuthStatus]:
    """Codex's ``account/read``, as ACP's sign-in state (``unknown`` when Codex refuses)."""
    try:
        read = yield Ask("account/read", codex_palette.NoParams(), _ACCOUNT)
    except Refused as refused:
        log.info("account/read refused: %s", refused.error.message)
        return acp_auth.AuthStatus(state="unknown")
    return auth_status(read)


def _cancel_login(login_id: str) -> Exchange:
    """Codex stops waiting for a ChatGPT sign-in nobody will finish."""
    try:
        yield Ask("account/login/cancel", codex_account.CancelLoginAccountParams(loginId=login_id))
    except Refused as refused:
        log.info("account/login/cancel refused: %s", refused.error.message)


#: How each kind of Codex account is named to the user.
ACCOUNT_LABELS = {
    "chatgpt": "ChatGPT",
    "apiKey": "OpenAI API key",
    "amazonBedrock": "Amazon Bedrock",
    "gcp": "Google Cloud Vertex AI",
}


def auth_status(result: codex_palette.AccountReadResult) -> acp_auth.AuthStatus:
    """Codex's ``account/read`` as ACP's sign-in state (see the module docstring)."""
    account = result.account
    if account is None:
        return acp_auth.AuthStatus(
            state="unauthenticated" if result.requiresOpenaiAuth else "not_required"
        )
    label = ACCOUNT_LABELS.get(account.type, account.type)
    if account.type == "chatgpt" and account.planType and account.planType != "unknown":
        label = f"{label} ({account.planType})"
    return acp_auth.AuthStatus(
        state="authenticated",
        accounts=[
            acp_auth.AuthAccount(
                label=label,
                active=True,
                email=account.email if account.email is not None else UNSET,
                organization=account.workspaceName if account.workspaceName is not None else UNSET,
            )
        ],
    )

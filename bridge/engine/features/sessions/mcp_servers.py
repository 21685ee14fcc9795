"""The MCP servers a session uses, as the user hears of them: in words, not only in
the log.

- **Left out.** A server the client named with a transport Codex cannot carry (SSE,
  ACP's ``acp``; :func:`._thread_config.mcp_servers_config`) is not given to Codex
  (v1; ACP v2 refuses the request instead): the user is told which one and what to
  give instead, when the session opens (new, load, resume, fork).
- **Failed to start.** Codex reports each server of a thread as it starts
  (``mcpServer/startupStatus/updated``, naming the thread): ``failed``, with its reason,
  is told on that session, once: again only after the server was ``ready`` meanwhile
  or failed for another reason. A sub-agent's thread starts the same servers its root
  did; their failures are the root's, told there.
- **Sign-in.** A server that fails for want of a sign-in is signed in to through
  Codex: ``mcpServer/oauth/login`` answers the page, Codex listens for its redirect
  itself. Codex says so with ``failureReason: reauthenticationRequired`` (stored
  credentials no longer valid); a server never signed in fails with no reason but its
  words ("not logged in. Run `codex mcp login NAME`"), so a failure's server is looked
  up (``mcpServerStatus/list`` for the thread and that server alone): ``notLoggedIn``,
  or ``authenticationRequired``, is a sign-in to offer. One sign-in a server at a time;
  the user may ask for one too (``/mcp login NAME``). The page reaches a client declaring URL elicitation as
  ``elicitation/create`` (mode ``url``, on the session), any other in words; Codex's
  ``mcpServer/oauthLogin/completed`` is told (success or its error) and ends the
  elicitation (``elicitation/complete``).

Words reach the user as a ``notice`` where the client takes notices (a v1 client
declaring ``session.notices``; every v2 client), else as an agent message (a thought
while a turn streams the model's answer). Until the session's open is answered, the
client knows no such session: what is to be told waits for the answer
(``ThreadRecord.mcp.untold``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import msgspec
from msgspec import Raw

from ....acp import auth as acp_auth
from ....acp import permissions as acp_permissions
from ....acp import types as acp_types
from ....codex import mcp as codex_mcp
from ....codex import palette as codex_palette
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges
from ...core.exchanges import Ask, Exchange, Refused
from ...core.hub import Hub
from ...core.record_parts import LeftOut
from ...core.threads import ThreadRecord
from ...views import translate
from ._thread_config import left_out_reason

log = logging.getLogger(__name__)


@dataclass(slots=True)
class OauthLogin:
    """An MCP server's sign-in Codex started for a session: its page offered, its end awaited."""

    name: str
    session_id: str
    #: The ``elicitation/create`` it was offered with (``None``: offered in words).
    elicitation_id: str | None = None


class McpServers:
    """What the user hears of a session's MCP servers (see the module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Sign-ins under way, by server name (Codex keeps one a server).
        self.logins: dict[str, OauthLogin] = {}
        #: Messages said in words, numbered (their message ids).
        self._said = 0

    # -- a session opens ------------------------------------------------------------------

    def opening(self, record: ThreadRecord, left_out: tuple[LeftOut, ...] = ()) -> None:
        """A session opens, with the servers the client named that are ``left_out``: what
        is to be told of its servers waits for the answer."""
        record.mcp.left_out = left_out
        if record.mcp.untold is None:
            record.mcp.untold = []

    def session_opened(self, record: ThreadRecord) -> None:
        """The open is answered: the servers left out, then what waited, are told."""
        untold, record.mcp.untold = record.mcp.untold or [], None
        left_out, record.mcp.left_out = record.mcp.left_out, ()
        for name, transport in left_out:
            self._tell(
                record,
                "warning",
                f"MCP server {name!r} was left out",
                left_out_reason(transport),
            )
        for tell in untold:
            tell()

    # -- Codex's word on a server ---------------------------------------------------------

    def startup_status(self, note: codex_mcp.McpServerStartupStatus) -> None:
        """``mcpServer/startupStatus/updated``: a failure told on the session it concerns."""
        for record in self._concerned(note.threadId):
            if note.status == "ready":
                record.mcp.failed.pop(note.name, None)
                continue
            if note.status != "failed":
                continue
            reason = note.error or "Codex gave no reason"
            if record.mcp.failed.get(note.name) == reason:
                continue  # told already
            record.mcp.failed[note.name] = reason
            if note.failureReason == codex_mcp.REAUTHENTICATION_REQUIRED:
                self._sign_in(record, note.name, reason)
            else:
                self._look_up(record, note.name, reason)

    def _look_up(self, record: ThreadRecord, name: str, reason: str) -> None:
        """Whether the failed server wants a sign-in (Codex's word on it), then told."""
        exchanges.start(self.hub, self._looked_up(record, name, reason))

    def _looked_up(self, record: ThreadRecord, name: str, reason: str) -> Exchange:
        params = codex_palette.McpServerStatusListParams(
            threadId=record.id, serverName=name, detail="toolsAndAuthOnly"
        )
        try:
            listed = yield Ask(
                "mcpServerStatus/list", params, codex_palette.McpServerStatusListResult
            )
        except Refused as refused:
            log.info("mcpServerStatus/list %s refused: %s", name, refused)
            listed = None
        server = None if listed is None else next((s for s in listed.data if s.name == name), None)
        if server is not None and (
            server.authStatus == "notLoggedIn" or server.runtimeStatus == "authenticationRequired"
        ):
            self._sign_in(record, name, reason)
            return
        self._tell(
            record,
            "error",
            f"MCP server {name!r} did not start",
            f"{_clause(reason)}; its tools are not available in this session",
        )

    def _concerned(self, thread_id: str | None) -> list[ThreadRecord]:
        """The root sessions a server of ``thread_id`` concerns (every one: none named)."""
        threads = self.hub.threads
        if thread_id is None:
            return [r for r in threads if r.session and r.parent_id is None]
        record = threads.session(thread_id)
        if record is None or record.parent_id is not None:
            # A sub-agent starts its root's servers again: the root was told of them.
            return []
        return [record]

    # -- sign-in ------------------------------------------------------------------------------

    def _sign_in(self, record: ThreadRecord, name: str, reason: str) -> None:
        """The server wants a sign-in: the user is told, and Codex's page offered at once
        (unless a sign-in to it is under way); a refusal is told, with the way to retry."""
        self._tell(record, "warning", f"MCP server {name!r} needs you to sign in", reason)
        if name in self.logins:
            return

        self.logins[name] = OauthLogin(name, record.id)  # its page is on its way
        self.login(record, name, partial(self._sign_in_refused, record, name))

    def _sign_in_refused(self, record: ThreadRecord, name: str, error: ErrorObject) -> None:
        self.logins.pop(name, None)
        self._tell(
            record,
            "error",
            f"Codex cannot sign in to MCP server {name!r}",
            f"{_clause(error.message)}; try again with /mcp login {name}",
        )

    def login(
        self,
        record: ThreadRecord,
        name: str,
        failed: Callable[[ErrorObject], None],
        offered: Callable[[str], None] | None = None,
    ) -> None:
        """Sign in to MCP server ``name`` for the session: Codex's page offered to the user
        (as ``elicitation/create`` where the client takes URL ones), and to ``offered``;
        without either, told in words."""
        exchanges.start(self.hub, self._logged_in(record, name, failed, offered))

    def _logged_in(
        self,
        record: ThreadRecord,
        name: str,
        failed: Callable[[ErrorObject], None],
        offered: Callable[[str], None] | None,
    ) -> Exchange:
        params = codex_mcp.McpServerOauthLoginParams(name=name, threadId=record.id)
        try:
            started = yield Ask(
                "mcpServer/oauth/login", params, codex_mcp.McpServerOauthLoginResult
            )
        except Refused as refused:
            log.info("mcpServer/oauth/login %s refused: %s", name, refused)
            failed(refused.error)
            return
        if self.hub.threads.session(record.id) is not record:
            return  # closed meanwhile: Codex's sign-in goes on unoffered
        self._offer(record, name, started, in_words=offered is None)
        if offered is not None:
            offered(started.authorizationUrl)

    def _offer(
        self,
        record: ThreadRecord,
        name: str,
        result: codex_mcp.McpServerOauthLoginResult,
        *,
        in_words: bool,
    ) -> None:
        url = result.authorizationUrl
        login = self.logins[name] = OauthLogin(name, record.id)
        elicitation = self.hub.handshake.client_capabilities.elicitation or {}
        if elicitation.get("url") is None:
            if not in_words:
                return
            self._tell(
                record,
                "info",
                f"Sign in to MCP server {name!r}",
                f"open this page in a browser: {url}",
            )
            return
        login.elicitation_id = result.loginId or f"mcp-oauth-{record.id}-{name}"
        self.hub.client.request(
            "elicitation/create",
            acp_permissions.UrlElicitationRequest(
                sessionId=record.id,
                message=f"Sign in to MCP server {name!r} in your browser to let Codex use it.",
                elicitationId=login.elicitation_id,
                url=url,
            ),
            lambda raw: self._elicitation_answered(login, raw),
            lambda error: log.info("elicitation/create refused: %s", error.message),
        )

    def _elicitation_answered(self, login: OauthLogin, raw: Raw) -> None:
        try:
            action = msgspec.json.decode(raw, type=acp_auth.ElicitationResult).action
        except (msgspec.ValidationError, msgspec.DecodeError):
            action = "none"
        if action != "accept":
            # Codex's sign-in waits out its own timeout; the user may still use /mcp login.
            log.info(
                "MCP server %s: the user did not open the sign-in page (%s)", login.name, action
            )

    def oauth_completed(self, note: codex_mcp.McpServerOauthLoginCompleted) -> None:
        """``mcpServer/oauthLogin/completed``: the session that offered it is told."""
        login = self.logins.pop(note.name, None)
        if login is None:
            return
        if login.elicitation_id is not None:
            self.hub.client.notify(
                "elicitation/complete",
                acp_auth.CompleteElicitationParams(elicitationId=login.elicitation_id),
            )
        record = self.hub.threads.session(login.session_id)
        if record is None:
            return
        if note.success:
            record.mcp.failed.pop(note.name, None)
            # Codex connects to it again with the new token, for the session's next turn.
            self._tell(
                record,
                "info",
                f"Signed in to MCP server {note.name!r}",
                "its tools are available from the next prompt on",
            )
        else:
            self._tell(
                record,
                "error",
                f"Sign-in to MCP server {note.name!r} failed",
                note.error or "Codex gave no reason",
            )

    def codex_lost(self) -> None:
        """Codex is gone, and the sign-ins it listened for with it: their pages are closed."""
        logins, self.logins = self.logins, {}
        for login in logins.values():
            if login.elicitation_id is not None:
                self.hub.client.notify(
                    "elicitation/complete",
                    acp_auth.CompleteElicitationParams(elicitationId=login.elicitation_id),
                )

    # -- telling ------------------------------------------------------------------------------

    def _tell(
        self, record: ThreadRecord, severity: str, title: str, description: str | None
    ) -> None:
        """Tell the user of the session, once its open is answered (module docstring)."""
        if record.mcp.untold is not None:
            record.mcp.untold.append(lambda: self._tell(record, severity, title, description))
            return
        hub = self.hub
        sessions = hub.handshake.client_capabilities.session or {}
        if sessions.get("notices") is not None:
            notice = acp_types.Notice(severity=severity, title=title)
            if description:
                notice.description = description
            hub.client.update(record.id, notice)
            return
        self._said += 1
        text = f"{title}: {description}\n" if description else f"{title}\n"
        message_id = f"{record.id}-mcp-{self._said}"
        if record.turn is not None:
            # The model's answer streams: its text stays the model's.
            hub.client.update(record.id, translate.thought_chunk(message_id, text))
        else:
            hub.client.update(
                record.id,
                acp_types.AgentMessageChunk(
                    content=acp_types.TextContent(text=text), messageId=message_id
                ),
            )


def _clause(text: str) -> str:
    """Codex's words as a clause of a sentence: no full stop of their own."""
    return text.rstrip().rstrip(".")

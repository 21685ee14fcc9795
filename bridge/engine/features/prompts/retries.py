"""A turn whose model Codex cannot reach is never left to Codex's endless retries.

Codex reports a turn's trouble with its model as ``error`` notifications.
``willRetry: false`` is the turn's failure: its message and ``codexErrorInfo`` are
kept on the turn, for the prompt's answer when the turn ends
(:mod:`bridge.engine.features.prompts.prompts`). ``willRetry: true`` is a retry:

- the client hears of each: a notice where it takes notices
  (``clientCapabilities.session.notices``), else a thought (the answer's text stays
  the model's);
- at the first, the bridge asks whether anybody is signed in (``account/read``):
  nobody, with a provider that wants an OpenAI sign-in, stops the turn at once with
  ``auth_required`` (not asked when the bridge picks the provider itself,
  ``-c model_provider``);
- Codex's retries within its budget say how far they are ("2/5"); past it, Codex
  waits for the network without end. After :data:`GIVE_UP_AFTER_WAITS` such waits
  the turn is stopped with an error naming the model provider (and its URL, from
  ``config/read``) Codex could not reach.

Stopping a turn interrupts it; its prompt is answered with the failure once Codex
reports the turn ended (every update of the turn before the answer).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol

from ....acp import types as acp_types
from ....codex import palette as codex_palette
from ....codex import settings as codex_settings
from ....codex import types as codex_types
from ....jsonrpc import ErrorCode, RpcError
from ...core import exchanges, turns
from ...core.exchanges import Ask, Exchange, Refused
from ...core.hub import Hub
from ...core.record_parts import Turn
from ...core.threads import ThreadRecord
from ...views import translate

log = logging.getLogger(__name__)


class Interrupts(Protocol):
    """Interrupts a session's turn (:class:`bridge.engine.features.prompts.prompts.Prompts`)."""

    def interrupt(self, record: ThreadRecord, turn: Turn) -> None: ...


class Retries:
    """Codex's ``error`` notifications for a session's turn (see the module docstring)."""

    def __init__(self, hub: Hub, *, prompts: Interrupts) -> None:
        self.hub = hub
        self._prompts = prompts

    def error(self, note: codex_types.ErrorNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if record is None or turn is None or turn.request_id is None:
            return
        if turn.id is not None and turn.id != note.turnId:
            return
        if not note.willRetry:
            turn.error_message = note.error.message
            turn.error_info = note.error.codexErrorInfo
            return
        # Codex cannot reach its model and retries, for as long as it takes when the
        # network is down: the client hears of it, and the prompt is bounded (never silent).
        turn.retries += 1
        if not re.search(_BUDGETED_RETRY, note.error.message):
            turn.waits += 1
        if turn.failure is not None:
            return
        self._retrying(record, note)
        if turn.retries == 1:
            self._check_sign_in(record, turn)
        if turn.waits >= GIVE_UP_AFTER_WAITS:
            self._unreachable(record, turn, note)

    def _retrying(self, record: ThreadRecord, note: codex_types.ErrorNotification) -> None:
        """Tell the client Codex is retrying, and why: a notice where it takes notices,
        else a thought (the answer's text stays the model's)."""
        why = _retry_reason(note.error)
        sessions = self.hub.handshake.client_capabilities.session or {}
        if sessions.get("notices") is not None:
            self.hub.client.update(
                record.id,
                acp_types.Notice(
                    severity="warning",
                    title="Codex cannot reach the model; retrying",
                    description=why,
                ),
            )
        else:
            text = f"Codex cannot reach the model ({why}); retrying.\n"
            self.hub.client.update(record.id, translate.thought_chunk(f"retry-{note.turnId}", text))

    def _check_sign_in(self, record: ThreadRecord, turn: Turn) -> None:
        """A model Codex cannot reach may be one it may not use: nobody is signed in and the
        model provider wants an OpenAI sign-in. Then waiting helps nobody (``auth_required``).
        Not asked when this bridge picks the provider itself (``-c model_provider``):
        ``account/read`` speaks of the configured one."""
        if "model_provider" not in (self.hub.thread_config or {}):
            exchanges.start(self.hub, self._sign_in_checked(record, turn))

    def _sign_in_checked(self, record: ThreadRecord, turn: Turn) -> Exchange:
        try:
            read = yield Ask(
                "account/read", codex_palette.NoParams(), codex_palette.AccountReadResult
            )
        except Refused as refused:
            log.info("account/read refused: %s", refused)
            return
        if not turns.current(record, turn) or turn.failure is not None:
            return
        if read.requiresOpenaiAuth and read.account is None:
            self._stop(
                record,
                turn,
                RpcError(
                    ErrorCode.AUTH_REQUIRED,
                    "Codex is not signed in, and its model provider needs an OpenAI "
                    "sign-in: authenticate (ChatGPT or an API key), then try again",
                    {"turnId": turn.id, "requiresOpenaiAuth": True},
                ),
            )

    def _unreachable(
        self, record: ThreadRecord, turn: Turn, note: codex_types.ErrorNotification
    ) -> None:
        """Codex has used its retries and waits for the network: the prompt fails, naming
        the model provider (and its URL, from ``config/read``) Codex could not reach."""
        hub = self.hub
        data: dict[str, Any] = {"turnId": note.turnId, "willRetry": True}
        if note.error.codexErrorInfo is not None:
            data["codexErrorInfo"] = note.error.codexErrorInfo
        if note.error.additionalDetails:
            data["additionalDetails"] = note.error.additionalDetails
        exchanges.start(hub, self._unreached(record, turn, data, _retry_reason(note.error)))

    def _unreached(
        self, record: ThreadRecord, turn: Turn, data: dict[str, Any], why: str
    ) -> Exchange:
        """The model provider named from Codex's config (and this bridge's overrides), then
        the turn stopped for it, unless it ended or was stopped meanwhile."""
        where = "its model provider"
        params = (
            codex_settings.ConfigReadParams(cwd=record.cwd)
            if record.cwd
            else codex_settings.ConfigReadParams()
        )
        try:
            read = yield Ask("config/read", params, codex_settings.ConfigReadResult)
        except Refused:
            read = None
        if read is not None:
            config = {**read.config, **(self.hub.thread_config or {})}
            provider = config.get("model_provider")
            providers = config.get("model_providers")
            table = providers.get(provider) if isinstance(providers, dict) else None
            url = table.get("base_url") if isinstance(table, dict) else None
            if isinstance(provider, str):
                data["modelProvider"] = provider
                where = f"its model provider {provider!r}" + (f" at {url}" if url else "")
        if turns.current(record, turn) and turn.failure is None:
            message = f"Codex could not reach {where} after {turn.retries} attempts: {why}"
            self._stop(record, turn, RpcError(ErrorCode.INTERNAL_ERROR, message, data))

    def _stop(self, record: ThreadRecord, turn: Turn, failure: RpcError) -> None:
        """End the turn for ``failure``: interrupted now, the prompt answered with it once
        Codex reports the turn ended (every update of the turn before the answer)."""
        turns.fail(turn, failure)
        log.warning("session %s: stopping its turn: %s", record.id, failure.message)
        self._prompts.interrupt(record, turn)


#: Codex's retries within its budget say how far they are ("Reconnecting... 2/5"); past
#: it, Codex waits for the network without end ("Reconnecting... waiting for network").
#: (Compiled at first use, by the re module's cache, not at import.)
_BUDGETED_RETRY = r"\b\d+/\d+\b"
#: Retries past the budget a prompt waits for before it fails: Codex 0.169 sends them
#: some 5 to 10 seconds apart, so a prompt that cannot reach its model fails within
#: about 20 seconds of Codex giving up its own budget.
GIVE_UP_AFTER_WAITS = 2


def _retry_reason(error: codex_types.TurnError) -> str:
    """Codex's words for a retry: its message, and the cause it gives."""
    details = error.additionalDetails
    return f"{error.message}: {details}" if details else error.message

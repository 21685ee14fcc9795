"""The slash commands answered without a turn: what they ask Codex, and what they say.

Each command (a :class:`~bridge.engine.views.commands.QuickCommand`) asks Codex what it
needs, then answers the prompt with one agent message in Markdown and ``end_turn``;
a command that changes state says what changed. Codex refusing is the prompt's
error, with Codex's words.

- ``/status``: the session (id, folder), model, reasoning effort, mode (approval and
  sandbox), context use (the last ``thread/tokenUsage/updated``), the account
  (``account/read``) and usage limits (``account/rateLimits/read``; "not available"
  when Codex cannot read them, e.g. with an API key);
- ``/mcp``: ``mcpServerStatus/list`` for the thread: each server, its state, its
  sign-in state, its tools; ``/mcp login NAME``: the server's OAuth sign-in through
  Codex (:meth:`bridge.engine.features.sessions.mcp_servers.McpServers.login`), its page
  in the answer;
- ``/skills``: ``skills/list`` for the session's folder;
- ``/goal``: ``thread/goal/get``; ``/goal OBJECTIVE`` sets it (``thread/goal/set``,
  active); ``/goal pause`` and ``/goal resume`` change its status; ``/goal clear``
  (``thread/goal/clear``);
- ``/plan`` and ``/plan off``: Codex's plan collaboration mode, on or off, stored in
  the thread (``thread/settings/update {collaborationMode}``, with the session's model
  and effort and Codex's own instructions for the mode), as the ``collaboration_mode``
  option sets it (the option follows);
- ``/rename NAME``: ``thread/name/set`` (Codex then reports the new title, which
  reaches the client as ``session_info_update``);
- ``/logout``: ``account/logout``;
- ``/rewind [N]``: the last N prompts taken back, their history (``thread/revert``) and their
  file changes where the files are still as they left them (through Codex's ``fs/*``), by
  its part :mod:`bridge.engine.features.palette._rewind`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from msgspec import UNSET

from ....codex import palette as codex_palette
from ....jsonrpc import RpcError
from ...core import exchanges
from ...core.answers import OnError, from_codex
from ...core.exchanges import All, Ask, Exchange, Refused, Steps
from ...core.hub import Hub
from ...core.ports import Collaboration
from ...core.threads import ThreadRecord
from ...views.commands import QuickCommand, mcp_login_name, rewind_count
from ._rewind import Rewind

log = logging.getLogger(__name__)

Done = Callable[[str], None]
Failed = Callable[[RpcError], None]


Offered = Callable[[str], None]


class McpSignIn(Protocol):
    """Signs in to an MCP server (:mod:`bridge.engine.features.sessions.mcp_servers`)."""

    def login(
        self, record: ThreadRecord, name: str, failed: OnError, offered: Offered | None = None
    ) -> None:
        """Codex's sign-in page for server ``name``, handed to ``offered``."""


class Described(Collaboration, Protocol):
    """The session's settings (:mod:`bridge.engine.features.settings.settings`)."""

    def describe(self, record: ThreadRecord) -> tuple[str, str | None, str, str] | None:
        """As the client sees them: (model, effort, mode name, mode description)."""


_GOAL_WORDS = {"pause": "paused", "resume": "active"}


class Palette:
    """Runs :data:`~bridge.engine.views.commands.QUICK` commands (see the module docstring)."""

    def __init__(self, hub: Hub, *, settings: Described, mcp: McpSignIn) -> None:
        self.hub = hub
        self._settings = settings
        self._mcp_servers = mcp
        self.rewinds = Rewind(hub)

    def run(self, record: ThreadRecord, command: QuickCommand, done: Done, failed: Failed) -> None:
        handler = getattr(self, "_" + command.name)
        handler(record, command.argument, done, failed)

    def _answer(self, steps: Steps[str], done: Done, failed: Failed) -> None:
        """Run a command's requests: ``done`` with the text ``steps`` end with, or ``failed``
        with Codex's refusal of any of them."""
        exchanges.start(self.hub, _answered(steps, done, failed))

    # -- /status -------------------------------------------------------------------------------

    def _status(self, record: ThreadRecord, _argument: str, done: Done, failed: Failed) -> None:
        exchanges.start(self.hub, self._status_read(record, done))

    def _status_read(self, record: ThreadRecord, done: Done) -> Exchange:
        """The account and its usage limits, read at once; either may be missing."""
        outcomes = yield All(
            (
                Ask("account/read", codex_palette.NoParams(), codex_palette.AccountReadResult),
                Ask(
                    "account/rateLimits/read",
                    codex_palette.NoParams(),
                    codex_palette.RateLimitsResult,
                ),
            )
        )
        answers: dict[str, Any] = {}
        for name, outcome in zip(("account", "limits"), outcomes, strict=True):
            if isinstance(outcome, Refused):
                log.info("/status: %s not available: %s", name, outcome)
            answers[name] = None if isinstance(outcome, Refused) else outcome
        done(status_text(record, self._settings.describe(record), **answers))

    # -- /mcp, /skills -------------------------------------------------------------------------

    def _mcp(self, record: ThreadRecord, argument: str, done: Done, failed: Failed) -> None:
        name = mcp_login_name(argument)
        if name is not None:
            self._mcp_servers.login(
                record,
                name,
                lambda error: failed(from_codex(error)),
                lambda url: done(
                    f"Sign in to MCP server `{name}` in your browser: {url}\n\n"
                    "Codex waits for the sign-in; this session is told when it completes."
                ),
            )
            return
        self._answer(_mcp_listed(record.id), done, failed)

    def _skills(self, record: ThreadRecord, _argument: str, done: Done, failed: Failed) -> None:
        self._answer(_skills_listed(record.cwd), done, failed)

    # -- /goal, /rename, /logout ---------------------------------------------------------------

    def _goal(self, record: ThreadRecord, argument: str, done: Done, failed: Failed) -> None:
        self._answer(_goal_changed(record.id, argument), done, failed)

    def _plan(self, record: ThreadRecord, argument: str, done: Done, failed: Failed) -> None:
        on = argument != "off"
        text = (
            "Plan mode on: Codex plans with you before it changes anything. "
            "`/plan off` returns to the default mode."
            if on
            else "Plan mode off: Codex works in its default mode again."
        )
        if not self._settings.set_collaboration(
            record,
            "plan" if on else "default",
            lambda: done(text),
            lambda error: failed(from_codex(error)),
        ):
            failed(RpcError.invalid_params("/plan: this session has no settings to change"))

    def _rename(self, record: ThreadRecord, argument: str, done: Done, failed: Failed) -> None:
        self._answer(_renamed(record.id, argument), done, failed)

    def _rewind(self, record: ThreadRecord, argument: str, done: Done, failed: Failed) -> None:
        self.rewinds.run(record, rewind_count(argument), done, failed)

    def _logout(self, _record: ThreadRecord, _argument: str, done: Done, failed: Failed) -> None:
        self._answer(_signed_out(), done, failed)


# -- what the commands say (pure) ------------------------------------------------------------


def status_text(
    record: ThreadRecord,
    described: tuple[str, str | None, str, str] | None,
    *,
    account: codex_palette.AccountReadResult | None,
    limits: codex_palette.RateLimitsResult | None,
) -> str:
    """``/status`` as Markdown: one line per fact, "not available" where Codex had none."""
    lines = ["**Session status**", "", f"- Session: `{record.id}`"]
    if record.cwd:
        lines.append(f"- Folder: `{record.cwd}`")
    if described is not None:
        model, effort, mode, policy = described
        lines.append(f"- Model: {model}" + (f" (reasoning effort {effort})" if effort else ""))
        lines.append(f"- Mode: {mode}: {policy}")
    usage = record.stream.usage
    if usage is not None and usage.modelContextWindow:
        used = usage.last.totalTokens
        share = 100 * used / usage.modelContextWindow
        lines.append(
            f"- Context: {used:,} of {usage.modelContextWindow:,} tokens ({share:.0f}% used)"
        )
    else:
        lines.append("- Context: nothing used yet")
    lines.append(f"- Account: {_account(account)}")
    lines.append(f"- Usage limits: {_limits(limits)}")
    return "\n".join(lines)


def _account(result: codex_palette.AccountReadResult | None) -> str:
    if result is None:
        return "not available"
    account = result.account
    if not account:
        return "not signed in" if result.requiresOpenaiAuth else "none needed by this provider"
    if account.type == "chatgpt":
        email = account.email or "ChatGPT"
        plan = account.planType
        return f"{email} (ChatGPT{' ' + plan if plan else ''})"
    if account.type == "apiKey":
        return "an API key"
    return account.type


def _limits(result: codex_palette.RateLimitsResult | None) -> str:
    snapshot = result.rateLimits if result is not None else None
    windows = [
        (name, window)
        for name, window in (
            ("primary", snapshot.primary if snapshot else None),
            ("secondary", snapshot.secondary if snapshot else None),
        )
        if window is not None
    ]
    if not windows:
        return "not available"
    parts = []
    for name, window in windows:
        span = _duration(window.windowDurationMins) if window.windowDurationMins else name
        text = f"{window.usedPercent:.0f}% of the {span} limit used"
        if window.resetsAt:
            reset = datetime.fromtimestamp(window.resetsAt, UTC).strftime("%Y-%m-%d %H:%M UTC")
            text += f" (resets {reset})"
        parts.append(text)
    return "; ".join(parts)


def _duration(minutes: int) -> str:
    if minutes % (60 * 24 * 7) == 0:
        return f"{minutes // (60 * 24 * 7)}-week"
    if minutes % (60 * 24) == 0:
        return f"{minutes // (60 * 24)}-day"
    if minutes % 60 == 0:
        return f"{minutes // 60}-hour"
    return f"{minutes}-minute"


def mcp_text(servers: list[codex_palette.McpServerStatus]) -> str:
    if not servers:
        return "No MCP servers are configured for this session."
    lines = ["**MCP servers**", ""]
    for server in sorted(servers, key=lambda s: s.name):
        state = server.runtimeStatus or "not started"
        lines.append(f"- **{server.name}**: {state}, sign-in {server.authStatus}")
        if server.authStatus == "notLoggedIn" or server.runtimeStatus == "authenticationRequired":
            lines.append(f"  - sign in with `/mcp login {server.name}`")
        if server.toolsError:
            lines.append(f"  - tools not available: {server.toolsError}")
        elif server.tools:
            lines.append(f"  - tools: {', '.join(f'`{t}`' for t in sorted(server.tools))}")
        else:
            lines.append("  - no tools")
    return "\n".join(lines)


def skills_text(skills: list[codex_palette.Skill]) -> str:
    if not skills:
        return "Codex has no skills for this workspace."
    lines = ["**Skills**", ""]
    for skill in sorted(skills, key=lambda s: s.name):
        off = "" if skill.enabled else " (disabled)"
        description = f": {skill.description}" if skill.description else ""
        lines.append(f"- **{skill.name}**{off}{description}")
    return "\n".join(lines)


def goal_text(goal: codex_palette.ThreadGoal | None) -> str:
    if goal is None:
        return "This session has no goal. Set one with `/goal OBJECTIVE`."
    budget = f" of {goal.tokenBudget:,}" if goal.tokenBudget else ""
    return (
        f"**Goal** ({goal.status}): {goal.objective}\n\n"
        f"{goal.tokensUsed:,}{budget} tokens and {goal.timeUsedSeconds} s spent on it so far."
    )


def _answered(steps: Steps[str], done: Done, failed: Failed) -> Exchange:
    try:
        text = yield from steps
    except Refused as refused:
        failed(from_codex(refused.error))
        return
    done(text)


# -- the commands' requests -----------------------------------------------------------------


def _mcp_listed(thread_id: str) -> Steps[str]:
    """``/mcp``: every MCP server's state, a page at a time."""
    servers: list[codex_palette.McpServerStatus] = []
    cursor: str | None = None
    while True:
        params = codex_palette.McpServerStatusListParams(threadId=thread_id, cursor=cursor or UNSET)
        page = yield Ask("mcpServerStatus/list", params, codex_palette.McpServerStatusListResult)
        servers.extend(page.data)
        if not page.nextCursor:
            return mcp_text(servers)
        cursor = page.nextCursor


def _skills_listed(cwd: str) -> Steps[str]:
    params = codex_palette.SkillsListParams(cwds=[cwd] if cwd else [])
    listed = yield Ask("skills/list", params, codex_palette.SkillsListResult)
    return skills_text([s for entry in listed.data for s in entry.skills])


def _goal_changed(thread_id: str, argument: str) -> Steps[str]:
    """``/goal`` (shown), ``/goal clear``, ``/goal pause`` / ``resume``, ``/goal TEXT``."""
    word = argument.lower()
    if not argument:
        params = codex_palette.ThreadGoalParams(threadId=thread_id)
        shown = yield Ask("thread/goal/get", params, codex_palette.ThreadGoalResult)
        return goal_text(shown.goal)
    if word == "clear":
        params = codex_palette.ThreadGoalParams(threadId=thread_id)
        yield Ask("thread/goal/clear", params, codex_palette.Empty)
        return "Goal cleared: this session has no goal now."
    if word in _GOAL_WORDS:
        change = codex_palette.ThreadGoalSetParams(threadId=thread_id, status=_GOAL_WORDS[word])
        verb = "paused" if word == "pause" else "resumed"
    else:
        change = codex_palette.ThreadGoalSetParams(
            threadId=thread_id, objective=argument, status="active"
        )
        verb = "set"
    changed = yield Ask("thread/goal/set", change, codex_palette.ThreadGoalResult)
    return f"Goal {verb}.\n\n{goal_text(changed.goal)}"


def _renamed(thread_id: str, name: str) -> Steps[str]:
    params = codex_palette.ThreadSetNameParams(threadId=thread_id, name=name)
    yield Ask("thread/name/set", params, codex_palette.Empty)
    return f"Renamed this session to “{name}”."


def _signed_out() -> Steps[str]:
    yield Ask("account/logout", codex_palette.NoParams(), codex_palette.Empty)
    return (
        "Signed out of Codex on this machine. Sign in again with the client's "
        "authentication (ChatGPT or an API key) before the next prompt."
    )

"""What the prompts feature asks of the features beside it, each behind a small protocol
(the wiring hands them in: :mod:`bridge.engine.engine`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ....codex import types as codex_types
from ....jsonrpc import RpcError
from ...core.threads import ThreadRecord
from ...views.commands import QuickCommand


class PlanQuestion(Protocol):
    """The question a proposed plan left open (:mod:`bridge.engine.features.prompts.proposed_plans`)."""

    def withdraw(self, session_id: str) -> None:
        """The session moved on: the question is taken back."""


Ready = Callable[[], None]
Failed = Callable[[str], None]
Folders = tuple[str, ...]


class TurnSettings(Protocol):
    """The session's settings (:mod:`bridge.engine.features.settings.settings`), as a turn needs them."""

    def turn_starting(self, record: ThreadRecord, request: codex_types.TurnStartParams) -> None:
        """Add the user's picks (mode, model, effort) to a ``turn/start``."""

    def input_modalities(self, record: ThreadRecord) -> list[str] | None:
        """The input the session's model takes (``None``: not known)."""

    def machine(self, record: ThreadRecord) -> str:
        """The machine the session's next turn acts on (``local``: this one)."""


class MachineGate(Protocol):
    """Waits for a machine to take a turn (:mod:`bridge.engine.features.settings.machines`)."""

    def when_ready(
        self, name: str, ready: Ready, failed: Failed, thread_id: str = "", folders: Folders = ()
    ) -> None:
        """``ready()`` once machine ``name`` can take a turn, else ``failed(reason)``."""

    def turn_starting(self, name: str) -> None:
        """A turn starts on machine ``name``: a loss of its link is behind it."""


class QuickCommands(Protocol):
    """Runs the slash commands answered without a turn (:mod:`bridge.engine.features.palette.palette`)."""

    def run(
        self,
        record: ThreadRecord,
        command: QuickCommand,
        done: Callable[[str], None],
        failed: Callable[[RpcError], None],
    ) -> None:
        """Call ``done`` with the command's text, or ``failed`` with the error to answer."""

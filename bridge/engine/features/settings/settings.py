"""A session's settings: its mode, model and reasoning effort, and the user's picks.

**Settings.** Each session offers three selectors (ACP ``configOptions``, the
mode also as the older ``modes``): its mode (Codex's approval presets,
:mod:`bridge.engine.views.presets`), its model and its reasoning effort (and
more: the collaboration mode, the machine, the profile). What
each offers, and which value is current, is :mod:`bridge.engine.features.settings._views`'s;
this feature keeps the facts those views read (the thread's ``Settings``, the
catalog), sends the client what changed (:meth:`SettingsSelectors._sync`: only
what it was not told already), and carries out the user's picks. The model
catalog (``model/list``) is asked once per connection to Codex, at its
handshake, so that the first ``session/new``, ``load`` or ``resume`` answer
already lists every model: a client that reads only that answer can pick any of
them.

Truth first: until the user picks, every value shown is what Codex reported
for the thread (``thread/start`` and friends, then ``thread/settings/updated``);
the bridge sends nothing that would override the user's configuration. A pick
is stored in the thread at once with Codex's experimental
``thread/settings/update`` (the client's request is answered once Codex has
it): it holds for every later turn and survives the bridge, and ``load`` and
``resume`` report it back. ``config.toml`` is never written. Until Codex
confirms, the pick also goes with a ``turn/start`` that overtakes it; with a
Codex that lacks the method, picks go with every ``turn/start`` instead
(``approvalPolicy`` + ``sandboxPolicy``, ``model``, ``effort``), which Codex
applies to that turn and keeps for the thread. ``/review``, ``/compact`` and
``/shell`` run with the thread's settings.

The profile (where Codex's home has config profiles) is another kind of pick: the
connection's, not the thread's. It decides the ``config`` of the threads started (or
opened) after it (:attr:`Hub.thread_config`); a profile's keys are config, which
Codex reads when a thread starts, and most of them (a provider, MCP servers,
instructions) have no ``thread/settings/update`` member, so an open thread keeps
what it started with rather than take part of a profile and look like all of it.

Once the client knows a session, it is offered the slash commands
(:mod:`bridge.engine.views.commands`), then the skills Codex has for the
session's folder (``skills/list``), each as a command of its own.
Authentication is :mod:`bridge.engine.features.sessions.auth`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from ....acp import commands as acp_commands
from ....acp import settings as acp_settings
from ....codex import palette as codex_palette
from ....codex import settings as codex_settings
from ....codex import types as codex_types
from ....jsonrpc import RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges
from ...core.answers import decode_params, from_codex, unknown_method
from ...core.codex_asks import ListSkills, StorePick
from ...core.effects import MachineChosen
from ...core.exchanges import Ask, Exchange, Refused
from ...core.folders import workspace_roots
from ...core.hub import Hub
from ...core.machines import LOCAL, machine_of, session_environment, workspace
from ...core.record_parts import Settings
from ...core.threads import ThreadRecord
from ...views import presets
from ...views.commands import COMMANDS, offered, skill_command
from . import _air_settings as air_settings
from . import _views as setting_views
from ._catalog import ModelCatalog

log = logging.getLogger(__name__)

#: A skill name usable as a slash command (compiled at first use, by the re module's
#: cache, not at import).
_COMMAND_NAME = r"[A-Za-z][\w-]*"


class SettingsSelectors:
    """The settings every session offers, and what follows a pick (see the module
    docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Codex's model catalog, asked once per connection to Codex.
        self.models = ModelCatalog(hub)
        #: False once Codex said it has no ``thread/settings/update`` (experimental).
        self.thread_settings_supported = True

    # -- sessions ------------------------------------------------------------------------------

    def session_opened(
        self, record: ThreadRecord, result: Any, opened: codex_types.ThreadStartResult
    ) -> None:
        """Fill the open result (new, load, resume, fork) with modes and options."""
        # Load, resume and fork answer with the same members, maybe in types of their own.
        approval = getattr(opened, "approvalPolicy", UNSET)
        sandbox = presets.without_folders(getattr(opened, "sandbox", UNSET), record.life.folders)
        model = getattr(opened, "model", UNSET)
        reported_effort = getattr(opened, "reasoningEffort", None)
        if approval is UNSET or sandbox is UNSET or not isinstance(model, str):
            # Not a thread Codex described in full (0.169 always does): offer nothing
            # rather than guess what is in force.
            log.info("thread %s: no settings reported; no modes or options", record.id)
            return
        effort = reported_effort if isinstance(reported_effort, str) else None
        settings = Settings(
            approval=approval, sandbox=sandbox, model=model, effort=effort, opened_model=model
        )
        if presets.preset_for(approval, sandbox) is None:
            settings.config_policy = (approval, sandbox)
        reviewer = getattr(opened, "approvalsReviewer", None)
        if isinstance(reviewer, str):
            settings.reviewer, settings.reviewer_known = reviewer, True
        collaboration = setting_views.collaboration_of(getattr(opened, "collaborationMode", None))
        if collaboration is not None:
            settings.collaboration = collaboration
            settings.collaboration_set = collaboration != "default"
        settings.machine = self._machine_of(record.id, getattr(opened, "thread", None))
        provider = getattr(opened, "modelProvider", None)
        settings.provider = provider if isinstance(provider, str) else None
        record.settings = settings
        modes = self._modes(settings)
        options = self._options(settings)
        settings.shown_mode = modes.currentModeId
        settings.shown_options = msgspec.json.encode(options)
        if hasattr(result, "modes"):
            result.modes = modes
        if hasattr(result, "configOptions"):
            result.configOptions = options

    def session_announced(self, record: ThreadRecord) -> None:
        """Offer the slash commands, now that the client knows the session; then ask for
        its skills, and offer each as a command of its own once they are known."""
        if record.settings is None:
            return
        air_client = self.hub.handshake.air is not None
        self.hub.client.update(
            record.id, acp_commands.AvailableCommandsUpdate(availableCommands=offered(air_client))
        )

        self.hub.codex.ask(
            record,
            ListSkills(air_client),
            "skills/list",
            codex_palette.SkillsListParams(cwds=[record.cwd] if record.cwd else []),
            codex_palette.SkillsListResult,
            self._skills_listed,
            _skills_unlisted,
        )

    def _skills_listed(
        self, record: ThreadRecord, asked: ListSkills, result: codex_palette.SkillsListResult
    ) -> None:
        air_client = asked.air
        builtin = {command.name for command in COMMANDS}
        record.skills = {
            skill.name: skill.path
            for entry in result.data
            for skill in entry.skills
            if skill.enabled
            and skill.path
            and skill.name not in builtin
            and re.fullmatch(_COMMAND_NAME, skill.name)
        }
        if record.skills:
            skills = [
                skill_command(skill.name, skill.description, skill.path, air_client)
                for entry in result.data
                for skill in entry.skills
                if skill.name in record.skills
            ]
            self.hub.client.update(
                record.id,
                acp_commands.AvailableCommandsUpdate(
                    availableCommands=[*offered(air_client), *skills]
                ),
            )

    def _machine_of(self, thread_id: str, thread: object) -> str:
        """The machine a thread acts on: the one stored for it (Codex forgets a thread's
        environments when it restarts), else the first Codex reports (one the user no
        longer names, or none: this one)."""
        if not self.hub.machines:
            return LOCAL
        stored = self.hub.setup.stored_machine(thread_id)
        if stored is not None:
            return stored if stored in self.hub.machines else LOCAL
        environments = getattr(thread, "environments", None) or []
        # The first is where it acts (Codex gives a thread started without any every
        # machine it knows, this one first).
        first = machine_of(environments[0].environmentId) if environments else LOCAL
        return first if first in self.hub.machines else LOCAL

    def machine(self, record: ThreadRecord) -> str:
        """The machine the session's next turn acts on."""
        settings = record.settings
        return setting_views.current_machine(settings) if settings is not None else LOCAL

    def turn_starting(self, record: ThreadRecord, params: codex_types.TurnStartParams) -> None:
        """The user's picks go with every turn, never into Codex's config file."""
        settings = record.settings
        if settings is None:
            return
        if self.hub.machines:
            # Every turn says where it acts: Codex keeps a turn's environments for the
            # turns after it, and for a thread loaded later.
            machine = setting_views.current_machine(settings)
            offer = self.hub.machines[machine].offer if machine in self.hub.machines else None
            own = offer is not None and offer.per_session
            here = codex_types.TurnEnvironment(
                environmentId=session_environment(machine, record.id) if own else machine,
                cwd=workspace(offer, record.cwd),
            )
            if machine == LOCAL or own:
                # A session's own container has its folders at the same paths.
                here.runtimeWorkspaceRoots = workspace_roots(record.cwd, record.life.folders)
            params.environments = [here]
            settings.machine, settings.picked_machine = machine, None
        if settings.picked_mode is not None:
            params.approvalPolicy, params.sandboxPolicy = presets.policy(
                settings, settings.picked_mode
            )
            reviewer = presets.reviewer(settings, settings.picked_mode)
            if reviewer is not None:
                params.approvalsReviewer = reviewer
        if settings.picked_collaboration is not None:
            params.collaborationMode = self._collaboration(settings, settings.picked_collaboration)
        if settings.picked_model is not None:
            params.model = settings.picked_model
        if settings.picked_effort is not None:
            params.effort = settings.picked_effort

    def settings_updated(self, note: codex_settings.ThreadSettingsUpdated) -> None:
        record = self.hub.threads.session(note.threadId)
        settings = record.settings if record is not None else None
        if settings is None:
            return
        reported = note.threadSettings
        if record is not None and record.life.folders:
            reported = msgspec.structs.replace(
                reported,
                sandboxPolicy=presets.without_folders(reported.sandboxPolicy, record.life.folders),
            )
        if self._stale(settings, reported):
            return
        if reported.approvalPolicy is not UNSET and reported.sandboxPolicy is not UNSET:
            settings.approval, settings.sandbox = reported.approvalPolicy, reported.sandboxPolicy
        if isinstance(reported.model, str):
            settings.model = reported.model
        if reported.effort is not UNSET:
            settings.effort = reported.effort
        if isinstance(reported.approvalsReviewer, str):
            settings.reviewer, settings.reviewer_known = reported.approvalsReviewer, True
        collaboration = setting_views.collaboration_of(reported.collaborationMode)
        if collaboration is not None and settings.picked_collaboration is None:
            # /plan, a pick's echo, or another client's change (the TUI's, on the daemon).
            settings.collaboration = collaboration
        self._sync(note.threadId, settings)

    @staticmethod
    def _stale(settings: Settings, reported: codex_settings.ThreadSettings) -> bool:
        """Whether ``reported`` is Codex's report of an update of the bridge's that a later
        one already replaced: Codex reports each update after answering it, so a pick the
        client made meanwhile would otherwise be undone until the next report."""
        for index, (approval, sandbox, model, effort) in enumerate(settings.echoes):
            # A member Codex leaves out is not a difference, nor an effort the bridge left
            # to the model's default (``None``: Codex reports that default).
            if (
                reported.model in (UNSET, model)
                and (reported.effort is UNSET or effort is None or reported.effort == effort)
                and (
                    reported.approvalPolicy is UNSET
                    or presets.same_policy(
                        reported.approvalPolicy, reported.sandboxPolicy, approval, sandbox
                    )
                )
            ):
                later = len(settings.echoes) - index - 1
                del settings.echoes[: index + 1]
                return later > 0
        # Not one of the bridge's own (another client's change, or Codex's own): it stands.
        settings.echoes.clear()
        return False

    def _modes(self, settings: Settings) -> acp_settings.SessionModeState:
        state = setting_views.modes(settings)
        if self.hub.handshake.air is not None:
            air_settings.decorate_modes(state, settings.reviewer)
        return state

    def _options(self, settings: Settings) -> list[acp_settings.SessionConfigSelect]:
        hub = self.hub
        options = setting_views.options(
            settings, self.catalog, hub.machines, list(hub.setup.profiles), hub.profile
        )
        if self.hub.handshake.air is not None:
            current = setting_views.current_model(settings)
            air_settings.decorate_options(
                options, self.catalog or [], current, self.hub.handshake.air, settings.reviewer
            )
        return options

    def describe(self, record: ThreadRecord) -> tuple[str, str | None, str, str] | None:
        """The session's model, effort, mode name and what the mode allows (``/status``)."""
        settings = record.settings
        if settings is None:
            return None
        modes = self._modes(settings)
        mode = next(m for m in modes.availableModes if m.id == modes.currentModeId)
        policy = presets.describe_policy(settings.approval, settings.sandbox)
        policy = policy.removeprefix("As your Codex configuration sets it: ")
        return (
            setting_views.current_model(settings),
            setting_views.current_effort(settings, self.catalog),
            mode.name,
            policy,
        )

    def input_modalities(self, record: ThreadRecord) -> list[str] | None:
        """What the session's model takes as input, as the catalog says (``None``: not known)."""
        settings = record.settings
        if settings is None:
            return None
        entry = setting_views.catalog_entry(self.catalog, setting_views.current_model(settings))
        return entry.inputModalities if entry is not None else None

    def _sync(
        self,
        session_id: str,
        settings: Settings,
        *,
        told_mode: bool = False,
        told_options: bool = False,
    ) -> None:
        """Tell the client what changed since it was last told (not what it just set itself)."""
        mode = setting_views.current_mode(settings)
        options = self._options(settings)
        encoded = msgspec.json.encode(options)
        if mode != settings.shown_mode and not told_mode:
            self.hub.client.update(session_id, acp_settings.CurrentModeUpdate(currentModeId=mode))
        if encoded != settings.shown_options and not told_options:
            self.hub.client.update(
                session_id, acp_settings.ConfigOptionUpdate(configOptions=options)
            )
        settings.shown_mode, settings.shown_options = mode, encoded

    # -- client requests -----------------------------------------------------------------------

    def _session_settings(self, session_id: str) -> Settings:
        settings = self.hub.threads.require(session_id).settings  # not found → -32002
        if settings is None:
            raise RpcError.invalid_params(f"session {session_id} has no settings to change")
        return settings

    def _check_mode(self, settings: Settings, mode_id: str) -> None:
        ids = presets.mode_ids(settings)
        if mode_id not in ids:
            raise RpcError.invalid_params(
                f"unknown mode {mode_id!r}; this session has {', '.join(ids)}", {"modeId": mode_id}
            )

    def set_mode(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_settings.SetSessionModeParams, "session/set_mode")
        settings = self._session_settings(params.sessionId)
        self._check_mode(settings, params.modeId)
        settings.picked_mode = params.modeId
        approval, sandbox = presets.policy(settings, params.modeId)
        change = codex_settings.ThreadSettingsUpdateParams(
            threadId=params.sessionId, approvalPolicy=approval, sandboxPolicy=sandbox
        )
        reviewer = presets.reviewer(settings, params.modeId)
        if reviewer is not None:
            change.approvalsReviewer = reviewer

        self._change(StorePick(rid, settings, change, mode=True))

    def set_config_option(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(
            raw, acp_settings.SetSessionConfigOptionParams, "session/set_config_option"
        )
        self.set_config(rid, params.sessionId, params.configId, params.value, params.type)

    def set_config(
        self, rid: RequestId, session_id: str, config_id: str, value: Any, kind: Any
    ) -> None:
        """``session/set_config_option`` (v1 and v2): ``kind`` is the value's ``type``."""
        settings = self._session_settings(session_id)
        option = next((o for o in self._options(settings) if o.id == config_id), None)
        if option is None:
            raise RpcError.invalid_params(
                f"unknown config option {config_id!r}; this session has "
                f"{', '.join(o.id for o in self._options(settings))}",
                {"configId": config_id},
            )
        # Selects only: a value id (string); unknown ``type``s with a string are value ids too.
        if kind == "boolean" or not isinstance(value, str):
            raise RpcError.invalid_params(
                f"config option {option.id!r} takes a value id (a string)"
            )
        if all(choice.value != value for choice in option.options):
            raise RpcError.invalid_params(
                f"{value!r} is not a value of config option {option.id!r}; it takes "
                f"{', '.join(choice.value for choice in option.options)}",
                {"configId": option.id, "value": value},
            )

        if option.id == setting_views.MACHINE_OPTION:
            # Goes with the next turn/start (a running turn stays where it is); reaching the
            # machine waits for the prompt that needs it.
            settings.picked_machine = value
            self.hub.effect(MachineChosen(session_id, value))
            self._picked(session_id, rid, settings, mode=False)
            return
        if option.id == setting_views.PROFILE_OPTION:
            # The connection's, for the threads started from now on: nothing changes in
            # this one (see the option's description); every session shows the pick.
            self.hub.profile = None if value == setting_views.NO_PROFILE else value
            self._picked(session_id, rid, settings, mode=False)
            for record in self.hub.threads.sessions():
                if record.id != session_id and record.settings is not None:
                    self._sync(record.id, record.settings)
            return
        change = codex_settings.ThreadSettingsUpdateParams(threadId=session_id)
        if option.id == setting_views.MODE_OPTION:
            settings.picked_mode = value
            change.approvalPolicy, change.sandboxPolicy = presets.policy(settings, value)
            reviewer = presets.reviewer(settings, value)
            if reviewer is not None:
                change.approvalsReviewer = reviewer
        elif option.id == setting_views.COLLABORATION_OPTION:
            settings.picked_collaboration = value
            change.collaborationMode = self._collaboration(settings, value)
        elif option.id == setting_views.MODEL_OPTION:
            self._pick_model(settings, value)
            change.model = value
            if settings.picked_effort is not None:
                change.effort = settings.picked_effort
        else:
            settings.picked_effort = value
            change.effort = value
        if option.id in (setting_views.MODEL_OPTION, setting_views.EFFORT_OPTION) and (
            settings.collaboration_set
        ):
            # The mode's own model and effort come before the thread's: both change.
            change.collaborationMode = self._collaboration(
                settings, setting_views.current_collaboration(settings)
            )
        self._change(StorePick(rid, settings, change, mode=False))

    def _picked(self, session_id: str, rid: RequestId, settings: Settings, *, mode: bool) -> None:
        """Answer the pick (``session/set_mode`` when ``mode``, else a config option's set),
        and tell the client what else changed with it."""
        if mode:
            self.hub.client.answer(rid, acp_settings.SetSessionModeResult())
            self._sync(session_id, settings, told_mode=True)
            return
        options = self._options(settings)
        self.hub.client.answer(
            rid, acp_settings.SetSessionConfigOptionResult(configOptions=options)
        )
        self._sync(session_id, settings, told_options=True)

    def _collaboration(self, settings: Settings, mode: str) -> dict[str, Any]:
        """Codex's ``collaborationMode`` for ``mode`` with the session's model and effort
        (``null`` instructions: Codex's own for the mode)."""
        return {
            "mode": mode,
            "settings": {
                "model": setting_views.current_model(settings),
                "reasoning_effort": setting_views.current_effort(settings, self.catalog),
                "developer_instructions": None,
            },
        }

    def set_collaboration(
        self,
        record: ThreadRecord,
        mode: str,
        done: Callable[[], None],
        failed: Callable[[ErrorObject], None],
    ) -> bool:
        """``/plan`` and ``/plan off``: the collaboration mode stored in the thread, and the
        option shown in step; ``False`` when the session has no settings. With a Codex that
        cannot store it (no ``thread/settings/update``) the mode is picked, as any pick is
        then: it goes with the next ``turn/start``, and ``done`` is called at once."""
        settings = record.settings
        if settings is None:
            return False
        exchanges.start(self.hub, self._collaboration_set(record.id, settings, mode, done, failed))
        return True

    def _collaboration_set(
        self,
        thread_id: str,
        settings: Settings,
        mode: str,
        done: Callable[[], None],
        failed: Callable[[ErrorObject], None],
    ) -> Exchange:
        if self.thread_settings_supported:
            change = codex_settings.ThreadSettingsUpdateParams(
                threadId=thread_id, collaborationMode=self._collaboration(settings, mode)
            )
            try:
                yield Ask("thread/settings/update", change)
            except Refused as refused:
                if not unknown_method(refused.error):
                    failed(refused.error)
                    return
                self._settings_unsupported(refused.error)
            else:
                settings.collaboration, settings.collaboration_set = mode, True
                if settings.picked_collaboration == mode:
                    settings.picked_collaboration = None
                self._sync(thread_id, settings)
                done()
                return
        # Not stored: picked, for the next turn/start.
        settings.picked_collaboration = mode
        self._sync(thread_id, settings)
        done()

    def _change(self, pick: StorePick) -> None:
        """Store a pick in the thread at once (``thread/settings/update``); answer the
        client once Codex has it. Until then, and for good with a Codex that lacks the
        method, the pick waits in ``settings.picked_*`` for the next ``turn/start``."""
        record = self.hub.threads.require(pick.change.threadId)
        if not self.thread_settings_supported:
            self._picked(record.id, pick.rid, pick.settings, mode=pick.mode)
            return
        self.hub.codex.ask(
            record,
            pick,
            "thread/settings/update",
            pick.change,
            None,
            self._pick_stored,
            self._pick_refused,
        )

    def _pick_stored(self, record: ThreadRecord, pick: StorePick, _result: object) -> None:
        # What Codex now has for the thread; a pick changed again meanwhile stays pending.
        settings, change = pick.settings, pick.change
        if isinstance(change.approvalsReviewer, str):
            settings.reviewer = change.approvalsReviewer
        mode = setting_views.collaboration_of(change.collaborationMode)
        if mode is not None:
            settings.collaboration, settings.collaboration_set = mode, True
            if settings.picked_collaboration == mode:
                settings.picked_collaboration = None
        if change.approvalPolicy is not UNSET:
            settings.approval, settings.sandbox = change.approvalPolicy, change.sandboxPolicy
            if settings.picked_mode is not None and presets.same_policy(
                settings.approval,
                settings.sandbox,
                *presets.policy(settings, settings.picked_mode),
            ):
                settings.picked_mode = None
        if isinstance(change.model, str):
            settings.model = change.model
            if settings.picked_model == change.model:
                settings.picked_model = None
        if isinstance(change.effort, str):
            settings.effort = change.effort
            if settings.picked_effort == change.effort:
                settings.picked_effort = None
        settings.echoes.append(
            (settings.approval, settings.sandbox, settings.model, settings.effort)
        )
        self._picked(record.id, pick.rid, settings, mode=pick.mode)

    def _pick_refused(self, record: ThreadRecord, pick: StorePick, error: ErrorObject) -> None:
        if unknown_method(error):
            self._settings_unsupported(error)
            self._picked(record.id, pick.rid, pick.settings, mode=pick.mode)
            return
        self.hub.client.refuse(pick.rid, from_codex(error))

    def _settings_unsupported(self, error: ErrorObject) -> None:
        self.thread_settings_supported = False
        log.warning(
            "Codex does not support thread/settings/update (%s): picks go with the "
            "next turn/start instead",
            error.message,
        )

    def _pick_model(self, settings: Settings, model: str) -> None:
        settings.picked_model = model
        entry = setting_views.catalog_entry(self.catalog, model)
        effort = settings.picked_effort if settings.picked_effort is not None else settings.effort
        if entry is None or effort is None:
            return  # the model's own default applies, and is what is shown
        if all(e.reasoningEffort != effort for e in entry.supportedReasoningEfforts):
            # Keep Codex from running the new model at an effort it does not support.
            settings.picked_effort = entry.defaultReasoningEffort

    # -- the model catalog ---------------------------------------------------------------------

    @property
    def catalog(self) -> list[codex_settings.Model] | None:
        """Codex's models (:mod:`bridge.engine.features.settings._catalog`)."""
        return self.models.models

    def ask_catalog(self) -> None:
        """Ask Codex for its models now (at the handshake); once they are in, every session
        is sent what it offers now."""
        self.models.ask(self._catalog_in)

    def when_catalog_ready(self, then: Callable[[], None]) -> None:
        self.models.when_ready(then)

    def _catalog_in(self) -> None:
        for record in self.hub.threads.sessions():
            if record.settings is not None:
                self._sync(record.id, record.settings)


def _skills_unlisted(record: ThreadRecord, _asked: ListSkills, error: ErrorObject) -> None:
    log.info("skills/list for %s failed: %s; no skill commands", record.id, error.message)

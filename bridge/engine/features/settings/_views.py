"""A session's settings as the client sees them: its modes and config options.

Pure functions of the session's :class:`~bridge.engine.core.threads.Settings`
(what Codex reported, what the user picked) and Codex's model catalog. Each
session offers three selectors, as ACP ``configOptions`` (the mode also as the
older ``modes``, for clients that only know those):

- *mode* (:data:`MODE_OPTION`): Codex's approval presets
  (:mod:`bridge.engine.views.presets`), plus the thread's own policies when no
  preset is them;
- *model* (:data:`MODEL_OPTION`): the catalog's models, plus the model the
  session opened with (and the current one) when the catalog lacks it: a custom
  provider's model stays offered after another is picked;
- *reasoning effort* (:data:`EFFORT_OPTION`): the efforts the current model
  supports, as the catalog says, and the current one; the option is left out
  when no effort is known (none configured, and the model not in the catalog);
- *collaboration mode* (:data:`COLLABORATION_OPTION`) and, where the user named
  machines, the *machine* (:data:`MACHINE_OPTION`);
- *profile* (:data:`PROFILE_OPTION`), where Codex's home has config profiles
  (``NAME.config.toml``): each of them, and :data:`NO_PROFILE`. Its value is the
  profile the threads started from now on get (the connection's, the same on every
  session); a session's own thread keeps the configuration it started with.

What is current is the user's pick, until Codex has it; else what Codex reported
for the thread (an effort it leaves unset is the model's default).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from msgspec import UNSET

from ....acp import settings as acp_settings
from ....codex import settings as codex_settings
from ...core.machines import LOCAL, Machine
from ...core.record_parts import Settings
from ...views.presets import CONFIG_MODE, describe_policy, offered, preset_for, same_policy

log = logging.getLogger(__name__)

#: Codex's model catalog (``model/list``), ``None`` when it is not known.
Catalog: TypeAlias = list[codex_settings.Model] | None

MODE_OPTION = "mode"
MODEL_OPTION = "model"
EFFORT_OPTION = "reasoning_effort"
MACHINE_OPTION = "machine"
COLLABORATION_OPTION = "collaboration_mode"
PROFILE_OPTION = "profile"
#: The ``profile`` option's value for no profile: ``config.toml`` alone (no file
#: ``(none).config.toml`` is offered as a profile).
NO_PROFILE = "(none)"
#: Codex's collaboration modes (``ModeKind``), as its TUI names them.
COLLABORATION_MODES = (
    ("default", "Default", "Codex works on what you ask."),
    (
        "plan",
        "Plan",
        "Codex plans with you before it changes anything: it asks what it needs, then "
        "proposes a plan for you to accept.",
    ),
)

_EFFORT_NAMES = {
    "none": "None",
    "minimal": "Minimal",
    "low": "Low",
    "medium": "Medium",
    "high": "High",
    "xhigh": "Extra high",
    "max": "Max",
    "ultra": "Ultra",
}


def _effort_name(effort: str) -> str:
    return _EFFORT_NAMES.get(effort, effort.capitalize())


def current_mode(settings: Settings) -> str:
    """The mode in force: the pick, else the preset (or the own policies) Codex reports."""
    if settings.picked_mode is not None:
        return settings.picked_mode
    preset = preset_for(settings.approval, settings.sandbox, settings.reviewer)
    if preset is not None and preset in offered(settings):
        return preset.id
    if settings.config_policy is not None and same_policy(
        settings.approval, settings.sandbox, *settings.config_policy
    ):
        return CONFIG_MODE
    # Changed outside this bridge to something no mode names: keep what was shown.
    log.warning(
        "thread settings match no mode: %s",
        describe_policy(settings.approval, settings.sandbox),
    )
    return settings.shown_mode or CONFIG_MODE


def modes(settings: Settings) -> acp_settings.SessionModeState:
    """The session's modes, as ACP's ``modes`` (and the mode option's values)."""
    available = [
        acp_settings.SessionMode(id=p.id, name=p.name, description=p.description)
        for p in offered(settings)
    ]
    if settings.config_policy is not None:
        available.append(
            acp_settings.SessionMode(
                id=CONFIG_MODE,
                name="Custom",
                description=describe_policy(*settings.config_policy),
            )
        )
    return acp_settings.SessionModeState(
        currentModeId=current_mode(settings), availableModes=available
    )


def current_model(settings: Settings) -> str:
    """The model in force: the pick, else the one Codex reports."""
    return settings.picked_model if settings.picked_model is not None else settings.model


def catalog_entry(catalog: Catalog, model: str) -> codex_settings.Model | None:
    """What the catalog says of ``model``, if it lists it."""
    if catalog is None:
        return None
    return next((m for m in catalog if m.model == model), None)


def current_effort(settings: Settings, catalog: Catalog) -> str | None:
    """The reasoning effort in force, ``None`` when it is not known."""
    if settings.picked_effort is not None:
        return settings.picked_effort
    if settings.effort is not None:
        return settings.effort
    entry = catalog_entry(catalog, current_model(settings))
    # No effort configured: Codex uses the model's default.
    return entry.defaultReasoningEffort if entry is not None else None


def options(
    settings: Settings,
    catalog: Catalog,
    machines: Mapping[str, Machine] | None = None,
    profiles: Sequence[str] = (),
    profile: str | None = None,
) -> list[acp_settings.SessionConfigSelect]:
    """The session's config options: mode, model and, when known, reasoning effort; the
    machine where the user named any; the profile (``profile`` in force) where Codex
    has ``profiles``."""
    selects = [_mode_select(settings), _model_select(settings, catalog)]
    effort = _effort_select(settings, catalog)
    if effort is not None:
        selects.append(effort)
    selects.append(_collaboration_select(settings))
    if machines:
        selects.append(_machine_select(settings, machines))
    if profiles:
        selects.append(_profile_select(profiles, profile))
    return selects


def _profile_select(
    profiles: Sequence[str], profile: str | None
) -> acp_settings.SessionConfigSelect:
    values = [
        acp_settings.SessionConfigSelectOption(
            value=NO_PROFILE, name="None", description="config.toml alone."
        )
    ]
    values += [
        acp_settings.SessionConfigSelectOption(
            value=name, name=name, description=f"{name}.config.toml over config.toml."
        )
        for name in profiles
    ]
    return acp_settings.SessionConfigSelect(
        id=PROFILE_OPTION,
        name="Profile",
        description=(
            "The Codex config profile (NAME.config.toml in Codex's home) of the sessions "
            "started or loaded from now on. A session keeps the configuration it started with: "
            "picking one changes nothing in this session (its model, reasoning effort and "
            "mode have options of their own)."
        ),
        currentValue=profile if profile is not None else NO_PROFILE,
        options=values,
    )


def current_collaboration(settings: Settings) -> str:
    """Codex's collaboration mode for the next turn: the pick, else Codex's."""
    if settings.picked_collaboration is not None:
        return settings.picked_collaboration
    return settings.collaboration


def _collaboration_select(settings: Settings) -> acp_settings.SessionConfigSelect:
    current = current_collaboration(settings)
    values = [
        acp_settings.SessionConfigSelectOption(value=value, name=name, description=description)
        for value, name, description in COLLABORATION_MODES
    ]
    return acp_settings.SessionConfigSelect(
        id=COLLABORATION_OPTION,
        name="Collaboration mode",
        description="Plan mode: Codex plans with you first (as /plan does).",
        currentValue=current,
        options=_offering(values, current, current),  # a mode of a later Codex
    )


def collaboration_of(reported: object) -> str | None:
    """The mode of Codex's ``collaborationMode`` (``{mode, settings}``), if it says one."""
    mode = reported.get("mode") if isinstance(reported, dict) else None
    return mode if isinstance(mode, str) else None


def current_machine(settings: Settings) -> str:
    """The machine the session's next turn acts on: the pick, else Codex's."""
    return settings.picked_machine if settings.picked_machine is not None else settings.machine


def _machine_select(
    settings: Settings, machines: Mapping[str, Machine]
) -> acp_settings.SessionConfigSelect:
    values = [
        acp_settings.SessionConfigSelectOption(
            value=LOCAL, name="Local", description="This machine, where the bridge runs."
        )
    ]
    for name, machine in machines.items():
        values.append(
            acp_settings.SessionConfigSelectOption(
                value=name, name=name, description=machine.offer.description or UNSET
            )
        )
    return acp_settings.SessionConfigSelect(
        id=MACHINE_OPTION,
        name="Machine",
        description="Where the session's commands run and its files are edited.",
        currentValue=current_machine(settings),
        options=values,
    )


def _mode_select(settings: Settings) -> acp_settings.SessionConfigSelect:
    shown = modes(settings)
    return acp_settings.SessionConfigSelect(
        id=MODE_OPTION,
        name="Mode",
        description="What Codex may do without asking: its approval and sandbox policies.",
        category="mode",
        currentValue=shown.currentModeId,
        options=[
            acp_settings.SessionConfigSelectOption(
                value=m.id, name=m.name, description=m.description
            )
            for m in shown.availableModes
        ],
    )


def _model_select(settings: Settings, catalog: Catalog) -> acp_settings.SessionConfigSelect:
    """The catalog's models; the model the session opened with stays offered after another
    is picked (it may be one of a custom provider, which the catalog does not list)."""
    current = current_model(settings)
    models = [
        acp_settings.SessionConfigSelectOption(
            value=m.model, name=m.displayName or m.model, description=m.description or UNSET
        )
        for m in catalog or []
    ]
    for model in dict.fromkeys([settings.opened_model, current]):
        if model and all(m.value != model for m in models):
            models.insert(
                0,
                acp_settings.SessionConfigSelectOption(
                    value=model,
                    name=model,
                    description="The model the session opened with, as Codex reported it.",
                ),
            )
    return acp_settings.SessionConfigSelect(
        id=MODEL_OPTION, name="Model", category="model", currentValue=current, options=models
    )


def _effort_select(settings: Settings, catalog: Catalog) -> acp_settings.SessionConfigSelect | None:
    """The efforts the current model supports (the catalog's, its default marked), and the
    current one; ``None`` when no effort is known."""
    effort = current_effort(settings, catalog)
    if effort is None:
        return None
    entry = catalog_entry(catalog, current_model(settings))
    supported = entry.supportedReasoningEfforts if entry is not None else []
    default = entry.defaultReasoningEffort if entry is not None else None
    efforts = [
        acp_settings.SessionConfigSelectOption(
            value=e.reasoningEffort,
            name=_effort_name(e.reasoningEffort),
            description=(e.description + (" (default)" if e.reasoningEffort == default else ""))
            or UNSET,
        )
        for e in supported
    ]
    return acp_settings.SessionConfigSelect(
        id=EFFORT_OPTION,
        name="Reasoning effort",
        category="thought_level",
        currentValue=effort,
        options=_offering(efforts, effort, _effort_name(effort)),
    )


def _offering(
    options: list[acp_settings.SessionConfigSelectOption], current: str, name: str
) -> list[acp_settings.SessionConfigSelectOption]:
    """``options``, and ``current`` (shown as ``name``) after them when it is none of them:
    the select's current value is always one it offers."""
    if all(option.value != current for option in options):
        options.append(acp_settings.SessionConfigSelectOption(value=current, name=name))
    return options

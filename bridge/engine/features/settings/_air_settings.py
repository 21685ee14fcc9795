"""AIR's keys on the session's settings (pure): the kind of each mode, and the values
Codex recommends for the model and the reasoning effort.

- ``_meta.jetbrains.air.kind`` on each mode (``SessionMode``, and each value of the
  ``mode`` config option), for every AIR client: who answers when Codex asks. ``read-only``
  and ``auto`` ask the user, ``standard`` (picking one sets the user as the reviewer); the
  current one of them is ``auto_review`` while the thread's approvals go to Codex's
  automatic reviewer (``approvalsReviewer``, as the user's config may set it);
  ``auto-review`` is ``auto_review``; ``full-access`` never asks, ``full_access``. The
  ``Custom`` mode of a thread's own policies has none.
- ``_meta.jetbrains.air.recommendedValue`` on the ``model`` and ``thought_level``
  selectors, for a client that declared ``recommendedValue``: the model Codex's
  catalog marks ``isDefault``, and the current model's ``defaultReasoningEffort``;
  only a value the selector offers, whatever is current.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....acp import air
from ....acp import settings as acp_settings
from ....codex import settings as codex_settings
from ...views.presets import AUTO_REVIEW, AUTO_REVIEW_MODE, reviewer_of

#: The presets that ask before acting, the one that never asks, the one Codex's reviewer answers.
_ASKING = frozenset({"read-only", "auto"})
_NEVER_ASKS = "full-access"


def mode_kind(mode_id: str, reviewer: str, *, current: bool = True) -> str | None:
    """AIR's kind of a mode, given who answers the thread's approvals now."""
    if mode_id == _NEVER_ASKS:
        return "full_access"
    if mode_id == AUTO_REVIEW_MODE:
        return "auto_review"
    if mode_id in _ASKING:
        automatic = current and reviewer_of(reviewer) == AUTO_REVIEW
        return "auto_review" if automatic else "standard"
    return None


def _kind(mode_id: str, reviewer: str, current: str) -> air.Meta | None:
    kind = mode_kind(mode_id, reviewer, current=mode_id == current)
    return air.meta({"kind": kind}) if kind is not None else None


def decorate_modes(state: acp_settings.SessionModeState, reviewer: str) -> None:
    for mode in state.availableModes:
        kind = _kind(mode.id, reviewer, state.currentModeId)
        if kind is not None:
            mode.meta = kind


def decorate_options(
    options: Sequence[acp_settings.SessionConfigSelect],
    catalog: Sequence[codex_settings.Model],
    current_model: str,
    declared: frozenset[str],
    reviewer: str,
) -> None:
    for option in options:
        recommended: str | None = None
        if option.category == "mode":
            for value in option.options:
                kind = _kind(value.value, reviewer, str(option.currentValue))
                if kind is not None:
                    value.meta = kind
        elif option.category == "model":
            recommended = next((m.model for m in catalog if m.isDefault), None)
        elif option.category == "thought_level":
            entry = next((m for m in catalog if m.model == current_model), None)
            recommended = entry.defaultReasoningEffort if entry is not None else None
        if (
            air.RECOMMENDED_VALUE in declared
            and recommended is not None
            and any(value.value == recommended for value in option.options)
        ):
            option.meta = air.meta({air.RECOMMENDED_VALUE: recommended})

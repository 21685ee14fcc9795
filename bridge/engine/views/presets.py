"""Codex's approval presets: the session modes, each a pair of policies.

Codex's own UI offers three presets (``builtin_approval_presets``), each an
approval policy (when Codex asks before acting) and a sandbox policy (where it
may act): ``read-only``, ``auto`` (shown as "Default", as Codex names it) and
``full-access``. The bridge offers them as the session's modes, with the same
ids, names and policies. Two policies are the same when they mean the same
thing: a sandbox's members Codex leaves out take their defaults
(:func:`same_policy`). A thread whose policies match no preset (the user's
``config.toml`` says something else) gets one more mode, :data:`CONFIG_MODE`,
standing for those policies and described in words (:func:`describe_policy`),
so that the client is never told a preset is in force when none is.

Where Codex routes approvals to its automatic reviewer (``approvalsReviewer``, Codex
0.171), one more preset: ``auto-review``, "Auto-review" as Codex's TUI names it, the
``auto`` policies with the reviewer ``auto_review``. Every preset names its reviewer, so
picking one sets both; a thread whose reviewer is automatic and whose policies are
``auto``'s opens in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.record_parts import Settings


@dataclass(frozen=True, slots=True)
class Preset:
    id: str
    name: str
    description: str
    approval: Any
    sandbox: dict[str, Any]
    #: Who answers what Codex asks (``approvalsReviewer``): the user, or Codex's reviewer.
    reviewer: str = "user"


#: Codex's automatic reviewer (``guardian_subagent``: its older name, still accepted).
AUTO_REVIEW = "auto_review"
_AUTO_REVIEWERS = frozenset({AUTO_REVIEW, "guardian_subagent"})
AUTO_REVIEW_MODE = "auto-review"


def reviewer_of(reported: str) -> str:
    """Codex's reviewer, its older name as the newer."""
    return AUTO_REVIEW if reported in _AUTO_REVIEWERS else reported


#: The presets of Codex's own UI (``builtin_approval_presets``): same ids, names and policies.
PRESETS: tuple[Preset, ...] = (
    Preset(
        "read-only",
        "Read Only",
        "Codex reads files and answers questions; editing files, running commands outside "
        "the sandbox or using the network needs your approval.",
        "on-request",
        {"type": "readOnly"},
    ),
    Preset(
        "auto",
        "Default",
        "Codex reads and edits files in the workspace and runs commands there; anything "
        "beyond the workspace, or the network, needs your approval.",
        "on-request",
        {"type": "workspaceWrite"},
    ),
    Preset(
        "full-access",
        "Full Access",
        "Codex edits files anywhere and uses the network without asking. Use with care.",
        "never",
        {"type": "dangerFullAccess"},
    ),
    Preset(
        AUTO_REVIEW_MODE,
        "Auto-review",
        "As Default, but what needs approval goes to Codex's automatic reviewer, which "
        "weighs the risk and approves or denies it instead of asking you.",
        "on-request",
        {"type": "workspaceWrite"},
        AUTO_REVIEW,
    ),
)
PRESETS_BY_ID = {preset.id: preset for preset in PRESETS}

#: The mode that stands for the policies the thread started with when no preset matches them.
CONFIG_MODE = "config"

#: Each sandbox type's members and their defaults: two policies are the same when these are.
_SANDBOX_DEFAULTS: dict[str, dict[str, Any]] = {
    "readOnly": {"networkAccess": False},
    "workspaceWrite": {
        "writableRoots": [],
        "networkAccess": False,
        "excludeTmpdirEnvVar": False,
        "excludeSlashTmp": False,
    },
    "dangerFullAccess": {},
    "externalSandbox": {"networkAccess": "restricted"},
}

_SANDBOX_NAMES = {
    "readOnly": "read-only",
    "workspaceWrite": "workspace-write",
    "dangerFullAccess": "danger-full-access",
    "externalSandbox": "external sandbox",
}


def _normal_sandbox(policy: Any) -> Any:
    if not isinstance(policy, dict) or policy.get("type") not in _SANDBOX_DEFAULTS:
        return policy
    kind = policy["type"]
    return {"type": kind} | {k: policy.get(k, d) for k, d in _SANDBOX_DEFAULTS[kind].items()}


def without_folders(sandbox: Any, folders: tuple[str, ...]) -> Any:
    """A thread's sandbox as Codex reports it, less the session's other folders: Codex
    lists its thread-scoped roots (``runtimeWorkspaceRoots``, but ``cwd``) among
    ``writableRoots``, and they stay the thread's whatever policy a mode sets, so the
    mode in force is the one the rest of the sandbox is."""
    if not folders or not isinstance(sandbox, dict):
        return sandbox
    roots = sandbox.get("writableRoots")
    if not isinstance(roots, list):
        return sandbox
    return {**sandbox, "writableRoots": [root for root in roots if root not in folders]}


def same_policy(approval: Any, sandbox: Any, other_approval: Any, other_sandbox: Any) -> bool:
    """Whether two (approval, sandbox) pairs mean the same thing (defaults filled in)."""
    same_sandbox = _normal_sandbox(sandbox) == _normal_sandbox(other_sandbox)
    return bool(approval == other_approval and same_sandbox)


def preset_for(approval: Any, sandbox: Any, reviewer: str = "user") -> Preset | None:
    """The preset these policies and this reviewer are, if any; policies with the automatic
    reviewer that no preset pairs with it are the user's preset of those policies."""
    reviewer = reviewer_of(reviewer)
    same = [p for p in PRESETS if same_policy(approval, sandbox, p.approval, p.sandbox)]
    return next((p for p in same if p.reviewer == reviewer), None) or next(
        (p for p in same if p.reviewer == "user"), None
    )


def offered(settings: Settings) -> list[Preset]:
    """The presets a session offers: ``auto-review`` only where Codex has a reviewer."""
    return [p for p in PRESETS if p.reviewer == "user" or settings.reviewer_known]


def reviewer(settings: Settings, mode_id: str) -> str | None:
    """Who answers the approvals of mode ``mode_id`` when that is a change (``None``: the
    thread's reviewer stays, for its own policies' mode, a Codex without reviewers, or a
    mode of the reviewer it has)."""
    if mode_id == CONFIG_MODE or not settings.reviewer_known:
        return None
    wanted = PRESETS_BY_ID[mode_id].reviewer
    return wanted if wanted != reviewer_of(settings.reviewer) else None


def describe_policy(approval: Any, sandbox: Any) -> str:
    """A person's summary of policies no preset matches, e.g. for ``config.toml`` values."""
    asks = approval if isinstance(approval, str) else "granular"
    where = "unknown"
    if isinstance(sandbox, dict):
        kind = sandbox.get("type")
        where = _SANDBOX_NAMES.get(str(kind), str(kind))
        if sandbox.get("networkAccess") in (True, "enabled"):
            where += " with network access"
        roots = sandbox.get("writableRoots") or []
        if roots:
            where += f" (+{len(roots)} writable root{'s' if len(roots) > 1 else ''})"
    return f"As your Codex configuration sets it: approval {asks}, sandbox {where}."


def mode_ids(settings: Settings) -> list[str]:
    """The modes a session offers: the presets, and its own policies' when no preset is them."""
    ids = [preset.id for preset in offered(settings)]
    return [*ids, CONFIG_MODE] if settings.config_policy is not None else ids


def policy(settings: Settings, mode_id: str) -> tuple[Any, Any]:
    """The (approval, sandbox) policies mode ``mode_id`` of the session stands for."""
    if mode_id == CONFIG_MODE and settings.config_policy is not None:
        return settings.config_policy
    preset = PRESETS_BY_ID[mode_id]
    return preset.approval, preset.sandbox

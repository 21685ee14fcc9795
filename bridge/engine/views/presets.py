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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.threads import Settings


@dataclass(frozen=True, slots=True)
class Preset:
    id: str
    name: str
    description: str
    approval: Any
    sandbox: dict[str, Any]


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


def same_policy(approval: Any, sandbox: Any, other_approval: Any, other_sandbox: Any) -> bool:
    """Whether two (approval, sandbox) pairs mean the same thing (defaults filled in)."""
    same_sandbox = _normal_sandbox(sandbox) == _normal_sandbox(other_sandbox)
    return bool(approval == other_approval and same_sandbox)


def preset_for(approval: Any, sandbox: Any) -> Preset | None:
    """The preset these policies are, if any."""
    for preset in PRESETS:
        if same_policy(approval, sandbox, preset.approval, preset.sandbox):
            return preset
    return None


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
    ids = [preset.id for preset in PRESETS]
    return [*ids, CONFIG_MODE] if settings.config_policy is not None else ids


def policy(settings: Settings, mode_id: str) -> tuple[Any, Any]:
    """The (approval, sandbox) policies mode ``mode_id`` of the session stands for."""
    if mode_id == CONFIG_MODE and settings.config_policy is not None:
        return settings.config_policy
    preset = PRESETS_BY_ID[mode_id]
    return preset.approval, preset.sandbox

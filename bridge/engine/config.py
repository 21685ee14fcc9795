"""A session's settings, slash commands and authentication.

**Settings.** Each session offers three selectors, as ACP ``configOptions``
(the mode also as the older ``modes``, for clients that only know those):

- *mode*: Codex's approval presets — ``read-only``, ``auto`` (shown as
  "Default", as Codex names it) and ``full-access`` — each a pair of an
  approval policy and a sandbox policy. When the thread's policies match no
  preset (the user's ``config.toml`` says something else), a ``config`` entry
  describes them, so the client never claims a preset that is not in force;
- *model*: Codex's model catalog (``model/list``, asked once, lazily), plus
  the thread's model when the catalog lacks it;
- *reasoning effort*: the efforts the current model supports (catalog), its
  default when the thread names none.

Truth first: until the user picks, every value shown is what Codex reported
for the thread (``thread/start`` and friends, then ``thread/settings/updated``);
the bridge sends nothing that would override the user's configuration. A pick
is remembered and sent with every later ``turn/start`` (``approvalPolicy`` +
``sandboxPolicy``, ``model``, ``effort``): Codex applies such overrides to that
turn and keeps them for the thread. ``/review``, ``/compact`` and ``/shell``
run with the thread's settings as the last turn left them.

**Slash commands** (``available_commands_update``, sent right after the session
is announced): ``/review [instructions]`` (``review/start``), ``/compact``
(``thread/compact/start``) and ``/shell COMMAND`` (``thread/shellCommand``).
Each starts a turn of its own in Codex; the prompt resolves when that turn ends.

**Authentication.** ``authMethods``: Codex's own ChatGPT sign-in
(``account/login/start`` type ``chatgpt``; the sign-in page reaches the user as
a URL elicitation tied to the ``authenticate`` request, or, for a client without
URL elicitation, in the error's message) and an API key from the bridge's
environment (``CODEX_API_KEY`` or ``OPENAI_API_KEY``, handed to Codex with
``account/login/start`` type ``apiKey``; the engine never reads the
environment itself: the shell passes the key in). A turn that fails for lack of
credentials fails its prompt with ACP's ``auth_required`` (-32000): see
:func:`lacks_credentials`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET, Raw

from ..acp import config as acp_cfg
from ..acp import types as acp
from ..codex import config as cx
from ..codex import types as codex
from ..jsonrpc import ErrorCode, RequestId, RpcError
from ..jsonrpc.peer import ErrorObject
from .engine import decode_params
from .sessions import Session

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger(__name__)


# -- modes: Codex's approval presets -----------------------------------------------------------


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
_PRESETS = {preset.id: preset for preset in PRESETS}

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


# -- config options ----------------------------------------------------------------------------

MODE_OPTION = "mode"
MODEL_OPTION = "model"
EFFORT_OPTION = "reasoning_effort"

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


# -- slash commands ----------------------------------------------------------------------------

COMMANDS: tuple[acp_cfg.AvailableCommand, ...] = (
    acp_cfg.AvailableCommand(
        name="review",
        description="Ask Codex to review the uncommitted changes, or what the instructions say.",
        input=acp_cfg.UnstructuredCommandInput(hint="optional: what to review"),
    ),
    acp_cfg.AvailableCommand(
        name="compact",
        description="Summarize the conversation so far to free up context.",
    ),
    acp_cfg.AvailableCommand(
        name="shell",
        description="Run a shell command yourself, outside the sandbox and without approval.",
        input=acp_cfg.UnstructuredCommandInput(hint="the command to run"),
    ),
)
_COMMAND = re.compile(r"/([A-Za-z][\w-]*)(?:\s+(.*))?\Z", re.DOTALL)


# -- authentication ----------------------------------------------------------------------------

CHATGPT_METHOD = "chatgpt"
API_KEY_METHOD = "api-key"

AUTH_METHODS: tuple[acp.AuthMethod, ...] = (
    acp.AuthMethod(
        id=CHATGPT_METHOD,
        name="Sign in with ChatGPT",
        description="Use your ChatGPT plan, through Codex's own sign-in in the browser.",
    ),
    acp.AuthMethod(
        id=API_KEY_METHOD,
        name="API key from the environment",
        description="Use the OpenAI API key in CODEX_API_KEY or OPENAI_API_KEY "
        "where the bridge runs.",
    ),
)

_MISSING_ENV_KEY = "Missing environment variable:"


def lacks_credentials(error: codex.TurnError | None) -> bool:
    """Whether a failed turn failed because Codex could not authenticate to the model.

    Codex 0.169 says so in three ways: ``codexErrorInfo: "unauthorized"``; an
    HTTP 401 from the provider (``{"httpConnectionFailed": {"httpStatusCode":
    401}}`` and the other stream variants); and, for a provider whose
    ``env_key`` names an unset variable, ``codexErrorInfo: "other"`` with the
    message ``Missing environment variable: `NAME`.`` (its only sign).
    """
    if error is None:
        return False
    info = error.codexErrorInfo
    if info == "unauthorized":
        return True
    if isinstance(info, dict) and any(
        isinstance(detail, dict) and detail.get("httpStatusCode") == 401 for detail in info.values()
    ):
        return True
    return error.message.startswith(_MISSING_ENV_KEY)


# -- per-session state -------------------------------------------------------------------------


@dataclass(slots=True)
class Settings:
    """One session's settings: what Codex reported, what the user picked, what was shown."""

    approval: Any
    sandbox: Any
    model: str
    effort: str | None
    #: The thread's first policies when they match no preset (the ``config`` mode).
    config_policy: tuple[Any, Any] | None = None
    picked_mode: str | None = None
    picked_model: str | None = None
    picked_effort: str | None = None
    #: What the client was last told, to send an update only when something changed.
    shown_mode: str = ""
    shown_options: bytes = b""


@dataclass(slots=True)
class Login:
    """A ChatGPT sign-in: an ``authenticate`` waiting on Codex's ``account/login/completed``."""

    request_id: RequestId
    login_id: str
    elicited: bool = False


class Configuration:
    """Modes, config options, slash commands and authentication (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.settings: dict[str, Settings] = {}
        #: Codex's model catalog (``model/list``, every page); None until first asked for.
        self.catalog: list[cx.Model] | None = None
        self.logins: dict[str, Login] = {}
        engine.on_client_request("session/set_mode", self._set_mode)
        engine.on_client_request("session/set_config_option", self._set_config_option)
        engine.on_client_request("authenticate", self._authenticate)
        engine.on_codex_notification("thread/settings/updated", self._on_settings_updated)
        engine.on_codex_notification("account/login/completed", self._on_login_completed)
        engine.initialize_hooks.append(self._on_initialize)
        engine.session_opened_hooks.append(self._on_session_opened)
        engine.session_announced_hooks.append(self._on_session_announced)
        engine.session_closed_hooks.append(self._on_session_closed)
        engine.turn_start_hooks.append(self._on_turn_start)
        engine.prompt_command_hooks.append(self._command)
        engine.lost_hooks.append(self._on_codex_lost)

    # -- sessions ------------------------------------------------------------------------------

    def _on_session_opened(
        self, session: Session, result: Any, opened: codex.ThreadStartResult
    ) -> None:
        # Load, resume and fork answer with the same members, maybe in types of their own.
        approval = getattr(opened, "approvalPolicy", UNSET)
        sandbox = getattr(opened, "sandbox", UNSET)
        model = getattr(opened, "model", UNSET)
        reported_effort = getattr(opened, "reasoningEffort", None)
        if approval is UNSET or sandbox is UNSET or not isinstance(model, str):
            # Not a thread Codex described in full (0.169 always does): offer nothing
            # rather than guess what is in force.
            log.info("thread %s: no settings reported; no modes or options", session.thread_id)
            return
        effort = reported_effort if isinstance(reported_effort, str) else None
        settings = Settings(approval=approval, sandbox=sandbox, model=model, effort=effort)
        if preset_for(approval, sandbox) is None:
            settings.config_policy = (approval, sandbox)
        self.settings[session.session_id] = settings
        modes = self._modes(settings)
        options = self._options(settings)
        settings.shown_mode = modes.currentModeId
        settings.shown_options = msgspec.json.encode(options)
        if hasattr(result, "modes"):
            result.modes = modes
        if hasattr(result, "configOptions"):
            result.configOptions = options
        self._ask_catalog()

    def _on_session_announced(self, session: Session) -> None:
        if session.session_id in self.settings:
            self.engine.update(
                session.session_id,
                acp_cfg.AvailableCommandsUpdate(availableCommands=list(COMMANDS)),
            )

    def _on_session_closed(self, session: Session) -> None:
        self.settings.pop(session.session_id, None)

    def _on_turn_start(self, session: Session, params: codex.TurnStartParams) -> None:
        settings = self.settings.get(session.session_id)
        if settings is None:
            return
        if settings.picked_mode is not None:
            params.approvalPolicy, params.sandboxPolicy = self._policy(
                settings, settings.picked_mode
            )
        if settings.picked_model is not None:
            params.model = settings.picked_model
        if settings.picked_effort is not None:
            params.effort = settings.picked_effort

    def _on_settings_updated(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=cx.ThreadSettingsUpdated)
        settings = self.settings.get(note.threadId)
        if settings is None:
            return
        reported = note.threadSettings
        if reported.approvalPolicy is not UNSET and reported.sandboxPolicy is not UNSET:
            settings.approval, settings.sandbox = reported.approvalPolicy, reported.sandboxPolicy
        if isinstance(reported.model, str):
            settings.model = reported.model
        if reported.effort is not UNSET:
            settings.effort = reported.effort
        self._sync(note.threadId, settings)

    # -- modes and options, as the client sees them --------------------------------------------

    def _mode_ids(self, settings: Settings) -> list[str]:
        ids = [preset.id for preset in PRESETS]
        return [*ids, CONFIG_MODE] if settings.config_policy is not None else ids

    def _policy(self, settings: Settings, mode_id: str) -> tuple[Any, Any]:
        if mode_id == CONFIG_MODE and settings.config_policy is not None:
            return settings.config_policy
        preset = _PRESETS[mode_id]
        return preset.approval, preset.sandbox

    def _current_mode(self, settings: Settings) -> str:
        if settings.picked_mode is not None:
            return settings.picked_mode
        preset = preset_for(settings.approval, settings.sandbox)
        if preset is not None:
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

    def _modes(self, settings: Settings) -> acp_cfg.SessionModeState:
        modes = [
            acp_cfg.SessionMode(id=p.id, name=p.name, description=p.description) for p in PRESETS
        ]
        if settings.config_policy is not None:
            modes.append(
                acp_cfg.SessionMode(
                    id=CONFIG_MODE,
                    name="Custom",
                    description=describe_policy(*settings.config_policy),
                )
            )
        return acp_cfg.SessionModeState(
            currentModeId=self._current_mode(settings), availableModes=modes
        )

    def _current_model(self, settings: Settings) -> str:
        return settings.picked_model if settings.picked_model is not None else settings.model

    def _catalog_entry(self, model: str) -> cx.Model | None:
        if self.catalog is None:
            return None
        return next((m for m in self.catalog if m.model == model), None)

    def _current_effort(self, settings: Settings) -> str | None:
        if settings.picked_effort is not None:
            return settings.picked_effort
        if settings.effort is not None:
            return settings.effort
        entry = self._catalog_entry(self._current_model(settings))
        # No effort configured: Codex uses the model's default.
        return entry.defaultReasoningEffort if entry is not None else None

    def _options(self, settings: Settings) -> list[acp_cfg.SessionConfigSelect]:
        modes = self._modes(settings)
        options = [
            acp_cfg.SessionConfigSelect(
                id=MODE_OPTION,
                name="Mode",
                description="What Codex may do without asking: its approval and sandbox policies.",
                category="mode",
                currentValue=modes.currentModeId,
                options=[
                    acp_cfg.SessionConfigSelectOption(
                        value=m.id, name=m.name, description=m.description
                    )
                    for m in modes.availableModes
                ],
            )
        ]
        current = self._current_model(settings)
        models = [
            acp_cfg.SessionConfigSelectOption(
                value=m.model, name=m.displayName or m.model, description=m.description or UNSET
            )
            for m in self.catalog or []
        ]
        if all(m.value != current for m in models):
            models.insert(
                0,
                acp_cfg.SessionConfigSelectOption(
                    value=current,
                    name=current,
                    description="The model your Codex configuration names.",
                ),
            )
        options.append(
            acp_cfg.SessionConfigSelect(
                id=MODEL_OPTION,
                name="Model",
                category="model",
                currentValue=current,
                options=models,
            )
        )
        effort = self._current_effort(settings)
        if effort is not None:
            entry = self._catalog_entry(current)
            supported = entry.supportedReasoningEfforts if entry is not None else []
            default = entry.defaultReasoningEffort if entry is not None else None
            efforts = [
                acp_cfg.SessionConfigSelectOption(
                    value=e.reasoningEffort,
                    name=_effort_name(e.reasoningEffort),
                    description=(
                        e.description + (" (default)" if e.reasoningEffort == default else "")
                    )
                    or UNSET,
                )
                for e in supported
            ]
            if all(e.value != effort for e in efforts):
                efforts.append(
                    acp_cfg.SessionConfigSelectOption(value=effort, name=_effort_name(effort))
                )
            options.append(
                acp_cfg.SessionConfigSelect(
                    id=EFFORT_OPTION,
                    name="Reasoning effort",
                    category="thought_level",
                    currentValue=effort,
                    options=efforts,
                )
            )
        return options

    def _sync(
        self,
        session_id: str,
        settings: Settings,
        *,
        told_mode: bool = False,
        told_options: bool = False,
    ) -> None:
        """Tell the client what changed since it was last told (not what it just set itself)."""
        mode = self._current_mode(settings)
        options = self._options(settings)
        encoded = msgspec.json.encode(options)
        if mode != settings.shown_mode and not told_mode:
            self.engine.update(session_id, acp_cfg.CurrentModeUpdate(currentModeId=mode))
        if encoded != settings.shown_options and not told_options:
            self.engine.update(session_id, acp_cfg.ConfigOptionUpdate(configOptions=options))
        settings.shown_mode, settings.shown_options = mode, encoded

    # -- client requests -----------------------------------------------------------------------

    def _session_settings(self, session_id: str) -> Settings:
        self.engine.session(session_id)  # not found → -32002
        settings = self.settings.get(session_id)
        if settings is None:
            raise RpcError.invalid_params(f"session {session_id} has no settings to change")
        return settings

    def _check_mode(self, settings: Settings, mode_id: str) -> None:
        ids = self._mode_ids(settings)
        if mode_id not in ids:
            raise RpcError.invalid_params(
                f"unknown mode {mode_id!r}; this session has {', '.join(ids)}", {"modeId": mode_id}
            )

    def _set_mode(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_cfg.SetSessionModeParams, "session/set_mode")
        settings = self._session_settings(params.sessionId)
        self._check_mode(settings, params.modeId)
        settings.picked_mode = params.modeId
        self.engine.client_result(rid, acp_cfg.SetSessionModeResult())
        self._sync(params.sessionId, settings, told_mode=True)

    def _set_config_option(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(
            raw, acp_cfg.SetSessionConfigOptionParams, "session/set_config_option"
        )
        settings = self._session_settings(params.sessionId)
        option = next((o for o in self._options(settings) if o.id == params.configId), None)
        if option is None:
            raise RpcError.invalid_params(
                f"unknown config option {params.configId!r}; this session has "
                f"{', '.join(o.id for o in self._options(settings))}",
                {"configId": params.configId},
            )
        value = params.value
        # Selects only: a value id (string); unknown ``type``s with a string are value ids too.
        if params.type == "boolean" or not isinstance(value, str):
            raise RpcError.invalid_params(
                f"config option {option.id!r} takes a value id (a string)"
            )
        if all(choice.value != value for choice in option.options):
            raise RpcError.invalid_params(
                f"{value!r} is not a value of config option {option.id!r}; it takes "
                f"{', '.join(choice.value for choice in option.options)}",
                {"configId": option.id, "value": value},
            )
        if option.id == MODE_OPTION:
            settings.picked_mode = value
        elif option.id == MODEL_OPTION:
            self._pick_model(settings, value)
        else:
            settings.picked_effort = value
        options = self._options(settings)
        self.engine.client_result(rid, acp_cfg.SetSessionConfigOptionResult(configOptions=options))
        self._sync(params.sessionId, settings, told_options=True)

    def _pick_model(self, settings: Settings, model: str) -> None:
        settings.picked_model = model
        entry = self._catalog_entry(model)
        effort = settings.picked_effort if settings.picked_effort is not None else settings.effort
        if entry is None or effort is None:
            return  # the model's own default applies, and is what is shown
        if all(e.reasoningEffort != effort for e in entry.supportedReasoningEfforts):
            # Keep Codex from running the new model at an effort it does not support.
            settings.picked_effort = entry.defaultReasoningEffort

    # -- the model catalog ---------------------------------------------------------------------

    def _ask_catalog(self, cursor: str | None = None) -> None:
        if cursor is None:
            if self.catalog is not None:
                return
            self.catalog = []
        params = cx.ModelListParams() if cursor is None else cx.ModelListParams(cursor=cursor)
        self.engine.codex_request("model/list", params, self._on_catalog, self._on_catalog_error)

    def _on_catalog(self, raw: Raw) -> None:
        try:
            page = msgspec.json.decode(raw, type=cx.ModelListResult)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            log.warning("model/list answer not understood: %s", exc)
            return
        assert self.catalog is not None
        self.catalog.extend(m for m in page.data if not m.hidden)
        if page.nextCursor:
            self._ask_catalog(page.nextCursor)
            return
        for session_id, settings in self.settings.items():
            self._sync(session_id, settings)

    def _on_catalog_error(self, error: ErrorObject) -> None:
        # Sessions keep offering the model they run; nothing else is known.
        log.warning("model/list failed: %s", error.message)

    # -- slash commands ------------------------------------------------------------------------

    def _command(self, session: Session, inputs: list[codex.UserInput]) -> tuple[str, Any] | None:
        if session.session_id not in self.settings or not inputs:
            return None
        first = inputs[0]
        match = _COMMAND.match(first.text) if isinstance(first, codex.TextInput) else None
        if match is None or match.group(1) not in {c.name for c in COMMANDS}:
            return None  # an ordinary prompt, even if it starts with a slash
        name = match.group(1)
        parts = [match.group(2) or ""]
        for index, extra in enumerate(inputs[1:], start=1):
            if not isinstance(extra, codex.TextInput):
                raise RpcError.invalid_params(
                    f"/{name} takes text only (prompt[{index}] is not text)"
                )
            parts.append(extra.text)
        argument = "\n".join(p.strip() for p in parts if p.strip())
        thread = session.thread_id
        if name == "review":
            target: cx.UncommittedChangesTarget | cx.CustomReviewTarget = (
                cx.CustomReviewTarget(instructions=argument)
                if argument
                else cx.UncommittedChangesTarget()
            )
            return "review/start", cx.ReviewStartParams(threadId=thread, target=target)
        if name == "compact":
            if argument:
                raise RpcError.invalid_params("/compact takes no arguments")
            return "thread/compact/start", cx.ThreadCompactStartParams(threadId=thread)
        if not argument:
            raise RpcError.invalid_params("/shell needs a command, e.g. /shell git status")
        return "thread/shellCommand", cx.ThreadShellCommandParams(threadId=thread, command=argument)

    # -- authentication ------------------------------------------------------------------------

    def _on_initialize(self, result: acp.InitializeResult) -> None:
        result.authMethods = list(AUTH_METHODS)

    def _authenticate(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_cfg.AuthenticateParams, "authenticate")
        if params.methodId == API_KEY_METHOD:
            key = self.engine.api_key
            if not key:
                raise RpcError.invalid_params(
                    "no API key: set CODEX_API_KEY or OPENAI_API_KEY where the bridge runs"
                )
            self.engine.codex_request(
                "account/login/start",
                cx.ApiKeyLogin(apiKey=key),
                lambda _result: self.engine.client_result(rid, acp_cfg.AuthenticateResult()),
                self.engine.forward_error(rid),
            )
        elif params.methodId == CHATGPT_METHOD:
            self.engine.codex_request(
                "account/login/start",
                cx.ChatgptLogin(),
                lambda result: self._chatgpt_started(rid, result),
                self.engine.forward_error(rid),
            )
        else:
            raise RpcError.invalid_params(
                f"unknown auth method {params.methodId!r}; this agent offers "
                f"{', '.join(m.id for m in AUTH_METHODS)}",
                {"methodId": params.methodId},
            )

    def _chatgpt_started(self, rid: RequestId, raw: Raw) -> None:
        try:
            started = msgspec.json.decode(raw, type=cx.LoginAccountResult)
            url, login_id = started.authUrl, started.loginId
        except (msgspec.ValidationError, msgspec.DecodeError):
            url = login_id = UNSET
        if not isinstance(url, str) or not isinstance(login_id, str):
            self.engine.client_error(rid, RpcError.internal("Codex started no ChatGPT sign-in"))
            return
        elicitation = self.engine.client_capabilities.elicitation or {}
        if elicitation.get("url") is None:
            # Without URL elicitation the page can only travel in the answer. Codex keeps
            # waiting for the browser's callback: signing in there is enough.
            self.engine.client_error(
                rid,
                RpcError(
                    ErrorCode.AUTH_REQUIRED,
                    f"Open this page in a browser to sign in with ChatGPT, then try again: {url}",
                    {"authUrl": url},
                ),
            )
            return
        login = self.logins[login_id] = Login(request_id=rid, login_id=login_id, elicited=True)
        self.engine.client_request(
            "elicitation/create",
            acp_cfg.UrlElicitationParams(
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
            action = msgspec.json.decode(raw, type=acp_cfg.ElicitationResult).action
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            action = f"an answer that is not one ({exc})"
        if action != "accept":
            self._elicitation_refused(login, f"the user did not open the sign-in page ({action})")

    def _elicitation_refused(self, login: Login, why: str) -> None:
        if self.logins.pop(login.login_id, None) is None:
            return  # already completed
        self.engine.codex_request(
            "account/login/cancel",
            cx.CancelLoginAccountParams(loginId=login.login_id),
            lambda _result: None,
            lambda error: log.info("account/login/cancel refused: %s", error.message),
        )
        self.engine.client_error(
            login.request_id, RpcError(ErrorCode.AUTH_REQUIRED, f"ChatGPT sign-in cancelled: {why}")
        )

    def _on_login_completed(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=cx.AccountLoginCompleted)
        login = self.logins.pop(note.loginId, None) if note.loginId is not None else None
        if login is None:
            return
        if login.elicited:
            self.engine.client_notification(
                "elicitation/complete",
                acp_cfg.CompleteElicitationParams(elicitationId=login.login_id),
            )
        if note.success:
            self.engine.client_result(login.request_id, acp_cfg.AuthenticateResult())
        else:
            message = note.error or "Codex reported no reason"
            self.engine.client_error(
                login.request_id,
                RpcError(ErrorCode.AUTH_REQUIRED, f"ChatGPT sign-in failed: {message}"),
            )

    def _on_codex_lost(self, reason: str) -> None:
        logins, self.logins = self.logins, {}
        for login in logins.values():
            self.engine.client_error(login.request_id, RpcError.internal(reason))


__all__ = [
    "AUTH_METHODS",
    "COMMANDS",
    "PRESETS",
    "Configuration",
    "lacks_credentials",
]

"""``codex-acp-bridge doctor``: the checks as pure functions, then the command against the real Codex."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge import __version__
from bridge.codex.palette import Account, AccountReadResult
from bridge.codex.versions import PINNED
from bridge.daemon.runtime import DaemonInfo, hold_lock, new_token, prepare, write_info
from bridge.doctor import (
    LOGIN_HINT,
    Check,
    CodexBinary,
    CodexWarning,
    ConfigFile,
    ConfigTrial,
    Environment,
    Findings,
    Handshake,
    RuntimeDir,
    as_json,
    binary_check,
    checklist,
    config_check,
    credentials_check,
    daemon_check,
    exit_code,
    overall,
    render,
    round_trip_check,
    selected_provider,
)
from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.doctor import line, run_doctor
from tests.support.e2e import SCENARIO_SECONDS, running_bridge

HOME = Path("/home/ada/.codex")
CONFIG = ConfigFile(HOME / "config.toml", exists=True, parsed={})
NOTHING = Environment(HOME, auth_file=False)
BINARY = CodexBinary("/usr/bin/codex", source="PATH", version=f"codex-cli {PINNED}")
ANSWERED = Handshake(0.4, user_agent=f"codex-acp-bridge/{PINNED} (Linux)", config=ConfigTrial())
BUBBLEWRAP = CodexWarning("Codex could not find bubblewrap on PATH. Install bubblewrap.")
IGNORED = CodexWarning(
    "Invalid configuration; using defaults.",
    "/home/ada/.codex/config.toml:2:17: unclosed table, expected `]`",
    "/home/ada/.codex/config.toml",
)
#: What Codex 0.169 answers config/read, then thread/start, for that config.
UNLOADABLE = ConfigTrial(
    read_error="failed to read configuration layers: /home/ada/.codex/config.toml:2:17: "
    "unclosed table, expected `]`",
    session_error="failed to load configuration: /home/ada/.codex/config.toml:2:17: "
    "unclosed table, expected `]`",
)
#: What tomllib says of the same file.
TOMLLIB_SAYS = "Unclosed array (at line 2, column 17)"
MOCK = {"model_provider": "mock", "model_providers": {"mock": {"base_url": "http://x/v1"}}}


#: doctor's checks, in the order it runs and shows them.
CHECKS = [
    "Codex binary",
    "Credentials",
    "config.toml",
    "Daemon",
    "Codex used",
    "Profile",
    "initialize round trip",
]


def signed(account: dict[str, Any] | None, *, requires_openai_auth: bool = True) -> Handshake:
    typed = msgspec.convert(account, Account) if account is not None else None
    result = AccountReadResult(account=typed, requiresOpenaiAuth=requires_openai_auth)
    return Handshake(
        0.4, user_agent="codex-acp-bridge/0.169.0", account=result, config=ConfigTrial()
    )


def private_dir(**kw: Any) -> RuntimeDir:
    return RuntimeDir(Path("/run/user/1000/codex-acp-bridge"), exists=True, **kw)


def refused_dir(what: str, fix: str) -> RuntimeDir:
    """A runtime directory the check refused (:func:`bridge.daemon.runtime.check_dir`)."""
    return RuntimeDir(Path("/run/user/1000/codex-acp-bridge"), exists=True, error=what, fix=fix)


def running(state: str = "running", **kw: Any) -> DaemonInfo:
    return DaemonInfo(
        pid=42,
        bridgeVersion=__version__,
        state=state,
        url="ws://127.0.0.1:4100" if state == "running" else "",
        codexVersion=f"codex-cli {PINNED}",
        **kw,
    )


# -- Codex binary ------------------------------------------------------------------------------


def test_a_tested_codex_is_fine_and_says_where_it_came_from() -> None:
    check = binary_check(BINARY)
    assert check.status == "ok" and check.hint is None
    assert check.detail == (
        f"/usr/bin/codex (from PATH): codex-cli {PINNED} (tested: 0.169.0 to 0.171.0)"
    )


@pytest.mark.parametrize("version", ["0.169.0", "0.170.3", "0.171.0"])
def test_any_codex_in_the_tested_range_is_fine_and_the_range_is_named(version: str) -> None:
    check = binary_check(
        CodexBinary("/usr/bin/codex", source="PATH", version=f"codex-cli {version}")
    )
    assert check.status == "ok" and check.hint is None
    assert check.detail.endswith(f"codex-cli {version} (tested: 0.169.0 to 0.171.0)")


@pytest.mark.parametrize("version", ["0.168.9", "0.171.2", "0.172.0"])
def test_a_codex_outside_the_tested_range_is_a_warning_naming_both_versions(version: str) -> None:
    check = binary_check(
        CodexBinary("/usr/bin/codex", source="PATH", version=f"codex-cli {version}")
    )
    assert check.status == "warning"
    assert version in check.detail and "(0.169.0 to 0.171.0)" in check.detail
    assert check.hint is not None and f"@openai/codex@{PINNED}" in check.hint


def test_no_codex_blocks_use_with_what_to_do() -> None:
    check = binary_check(
        CodexBinary(None, problem="Codex binary '/nope' (from --codex-bin) does not exist")
    )
    assert check.status == "error"
    assert "/nope" in check.detail
    assert check.hint is not None and "npm install -g @openai/codex" in check.hint


def test_a_binary_that_cannot_say_its_version_blocks_use_and_one_without_a_version_warns() -> None:
    failed = binary_check(CodexBinary("/bin/x", version_failure="exit status 2: bad flag"))
    assert failed.status == "error" and "bad flag" in failed.detail and failed.hint
    unknown = binary_check(CodexBinary("/bin/x", version="codex nightly"))
    assert unknown.status == "warning" and "codex nightly" in unknown.detail


# -- credentials ---------------------------------------------------------------------------------


def test_what_codex_says_of_the_account_is_reported() -> None:
    chatgpt = {"type": "chatgpt", "email": "ada@example.com", "planType": "plus"}
    check = credentials_check(signed(chatgpt), CONFIG, NOTHING)
    assert check == Check("Credentials", "ok", "signed in with ChatGPT: ada@example.com (plus)")
    check = credentials_check(signed({"type": "apiKey"}), CONFIG, NOTHING)
    assert check.status == "ok" and "API key" in check.detail


def test_a_provider_needing_no_openai_login_counts_as_credentials() -> None:
    config = ConfigFile(HOME / "config.toml", exists=True, parsed=MOCK)
    check = credentials_check(signed(None, requires_openai_auth=False), config, NOTHING)
    assert check == Check("Credentials", "ok", "custom provider mock (no login needed)")


def test_a_custom_provider_s_env_key_must_be_set() -> None:
    parsed = {"model_provider": "acme", "model_providers": {"acme": {"env_key": "ACME_KEY"}}}
    config = ConfigFile(HOME / "config.toml", exists=True, parsed=parsed)
    handshake = signed(None, requires_openai_auth=False)
    missing = credentials_check(handshake, config, NOTHING)
    assert missing.status == "error" and "$ACME_KEY" in missing.detail
    assert missing.hint is not None and "ACME_KEY" in missing.hint
    present = credentials_check(
        handshake, config, Environment(HOME, False, frozenset({"ACME_KEY"}))
    )
    assert present.status == "ok" and "$ACME_KEY" in present.detail


def test_a_profile_selects_the_provider() -> None:
    parsed = {
        "model_provider": "openai",
        "profile": "work",
        "profiles": {"work": {"model_provider": "acme"}},
        "model_providers": {"acme": {"env_key": "ACME_KEY"}},
    }
    assert selected_provider(parsed) == ("acme", {"env_key": "ACME_KEY"})
    assert selected_provider(None) == ("openai", {})


def test_signed_out_is_a_warning_with_the_way_to_sign_in_unless_an_api_key_is_set() -> None:
    """Not blocking: the editor offers Codex's sign-in when a prompt needs it."""
    check = credentials_check(signed(None), CONFIG, NOTHING)
    assert check.status == "warning" and check.hint == LOGIN_HINT
    assert "codex login" in LOGIN_HINT and "OPENAI_API_KEY" in LOGIN_HINT
    keyed = Environment(HOME, False, frozenset({"OPENAI_API_KEY"}))
    check = credentials_check(signed(None), CONFIG, keyed)
    assert check.status == "ok" and "$OPENAI_API_KEY" in check.detail


def test_signed_out_on_codex_s_defaults_says_so() -> None:
    """A config Codex cannot load puts it on OpenAI's provider, whatever config.toml says."""
    handshake = Handshake(
        0.4, account=AccountReadResult(account=None, requiresOpenaiAuth=True), config=UNLOADABLE
    )
    check = credentials_check(handshake, CONFIG, NOTHING)
    assert check.status == "warning"
    assert check.detail == "not signed in (Codex's account/read, on its defaults)"


def test_without_codex_s_answer_the_files_say_it() -> None:
    unanswered = Handshake(10.0, failure="no answer to initialize within 10 s")
    check = credentials_check(unanswered, CONFIG, Environment(HOME, auth_file=True))
    assert check.status == "ok" and "auth.json" in check.detail and "within 10 s" in check.detail
    check = credentials_check(None, ConfigFile(HOME / "config.toml", True, MOCK), NOTHING)
    assert check.status == "ok" and "custom provider mock" in check.detail
    check = credentials_check(unanswered, CONFIG, NOTHING)
    assert check.status == "warning" and check.hint == LOGIN_HINT


# -- config.toml ----------------------------------------------------------------------------------


def test_no_config_is_fine() -> None:
    check = config_check(ConfigFile(HOME / "config.toml", exists=False), ANSWERED)
    assert check.status == "ok" and check.detail.startswith("none; Codex defaults")


def test_a_config_codex_accepts_is_fine() -> None:
    check = config_check(CONFIG, ANSWERED)
    assert check == Check("config.toml", "ok", f"{HOME / 'config.toml'}: Codex accepts it")


def positions(text: str) -> list[str]:
    """Every position quoted: Codex's ``file:line:column`` and tomllib's ``(at line L, column C)``."""
    return re.findall(r":\d+:\d+:|at line \d+", text)


def test_a_config_codex_cannot_load_fails_every_session_in_codex_s_words_alone() -> None:
    broken = ConfigFile(HOME / "config.toml", exists=True, error=TOMLLIB_SAYS)
    handshake = Handshake(0.4, warnings=(IGNORED,), config=UNLOADABLE)
    check = config_check(broken, handshake)
    assert check.status == "error"
    assert check.detail == f"every new session will fail: {UNLOADABLE.session_error}"
    assert positions(check.detail) == [":2:17:"]  # one position, Codex's
    assert check.hint is not None and "refuses every new session" in check.hint
    assert "defaults" not in check.detail + check.hint


def test_a_config_codex_cannot_load_though_it_parses_fails_every_session() -> None:
    trial = ConfigTrial(
        read_error="failed to resolve feature override precedence: Model provider `nope` not found",
        session_error="failed to load configuration: Model provider `nope` not found",
    )
    check = config_check(CONFIG, Handshake(0.4, config=trial))
    assert check.status == "error"
    assert check.detail == (
        f"{HOME / 'config.toml'}: every new session will fail: "
        "failed to load configuration: Model provider `nope` not found"
    )
    assert check.hint


def test_without_codex_tomllib_s_words_say_it_with_their_position() -> None:
    broken = ConfigFile(HOME / "config.toml", exists=True, error=TOMLLIB_SAYS)
    for unasked in (None, Handshake(10.0, failure="no answer to initialize within 10 s")):
        check = config_check(broken, unasked)
        assert check.status == "error" and TOMLLIB_SAYS in check.detail
        assert "Codex could not be asked" in check.detail
        assert positions(check.detail) == ["at line 2"]
        assert check.hint is not None and "refuses every new session" in check.hint


def test_codex_s_warning_speaks_when_config_read_was_not_answered() -> None:
    broken = ConfigFile(HOME / "config.toml", exists=True, error=TOMLLIB_SAYS)
    check = config_check(broken, Handshake(0.4, warnings=(IGNORED,)))
    assert check.status == "error" and "every new session will fail" in check.detail
    assert positions(check.detail) == [":2:17:"]  # Codex's, not tomllib's too


def test_a_session_that_starts_though_config_read_fails_is_a_warning() -> None:
    trial = ConfigTrial(read_error="config/read broke")
    check = config_check(CONFIG, Handshake(0.4, config=trial))
    assert check.status == "warning" and "a session starts" in check.detail
    assert "config/read broke" in check.detail


def test_codex_decides_where_tomllib_and_codex_disagree() -> None:
    odd = ConfigFile(HOME / "config.toml", exists=True, error=TOMLLIB_SAYS)
    check = config_check(odd, ANSWERED)
    assert check.status == "warning" and "Codex accepts it" in check.detail


def test_codex_s_other_warnings_about_the_file_warn() -> None:
    deprecated = CodexWarning("`foo` is deprecated", "use `bar`", str(HOME / "config.toml"))
    check = config_check(CONFIG, Handshake(0.4, warnings=(deprecated,)))
    assert check.status == "warning" and "use `bar`" in check.detail


# -- the daemon -----------------------------------------------------------------------------------


def test_no_daemon_is_fine() -> None:
    assert daemon_check(RuntimeDir(Path("/run/x"), exists=False)).status == "ok"
    check = daemon_check(private_dir())
    assert check.status == "ok" and "see 'Codex used'" in check.detail


def test_a_running_daemon_in_a_private_directory_is_fine() -> None:
    check = daemon_check(private_dir(daemon_running=True, daemon=running()))
    assert check.status == "ok"
    assert "pid 42" in check.detail and "ws://127.0.0.1:4100" in check.detail


def test_a_refused_runtime_directory_blocks_use_with_the_check_s_own_words() -> None:
    what = "runtime directory /tmp/d belongs to uid 1001 (alice), not you: someone else made it"
    check = daemon_check(refused_dir(what, "remove it (as root)"))
    assert (check.status, check.detail) == ("error", f"{what} (serve uses no daemon there)")
    assert check.hint == "remove it (as root)"


def test_a_failed_daemon_blocks_use_and_a_restarting_one_warns() -> None:
    failed = daemon_check(private_dir(daemon_running=True, daemon=running("failed", reason="loop")))
    assert failed.status == "error" and "loop" in failed.detail and failed.hint
    restarting = daemon_check(private_dir(daemon_running=True, daemon=running("restarting")))
    assert restarting.status == "warning"


# -- the round trip -------------------------------------------------------------------------------


def test_an_answered_initialize_reports_its_time_and_user_agent() -> None:
    check = round_trip_check(ANSWERED, BINARY)
    assert check == Check(
        "initialize round trip", "ok", f"answered in 0.40 s: codex-acp-bridge/{PINNED} (Linux)"
    )


def test_codex_s_other_warnings_make_the_round_trip_a_warning() -> None:
    handshake = Handshake(0.4, user_agent="ua", warnings=(BUBBLEWRAP, IGNORED))
    check = round_trip_check(handshake, BINARY)
    assert check.status == "warning" and check.hint == f"Codex warns: {BUBBLEWRAP.summary}"


def test_no_answer_blocks_use() -> None:
    check = round_trip_check(Handshake(10.0, failure="no answer within 10 s"), BINARY)
    assert check.status == "error" and "no answer" in check.detail
    assert check.hint == "run `/usr/bin/codex app-server` in a terminal to see what Codex says"
    assert round_trip_check(None, CodexBinary(None)).status == "error"


# -- the verdict, the checklist, the JSON -------------------------------------------------------


def findings(**kw: Any) -> Findings:
    base: dict[str, Any] = {
        "binary": BINARY,
        "handshake": signed(None, requires_openai_auth=False),
        "config": ConfigFile(HOME / "config.toml", exists=True, parsed=MOCK),
        "environment": NOTHING,
        "runtime": RuntimeDir(Path("/run/x"), exists=False),
        "choice": "Codex: its own, /bin/codex; no daemon runs on /run/x, no Codex daemon on /h",
    }
    return Findings(**(base | kw))


def test_which_codex_serve_would_use_is_said() -> None:
    says = "Codex: Codex's daemon on /h/app-server-control/app-server-control.sock (...)"
    [check] = [c for c in checklist(findings(choice=says)) if c.name == "Codex used"]
    assert (check.status, check.detail) == ("ok", says.removeprefix("Codex: "))


def test_a_warning_does_not_block_use_an_error_does() -> None:
    ok, warning, error = (Check("a", s, "d") for s in ("ok", "warning", "error"))  # type: ignore[arg-type]
    assert (overall([ok]), exit_code([ok])) == ("ok", 0)
    assert (overall([ok, warning]), exit_code([ok, warning])) == ("warning", 0)
    assert (overall([warning, error, ok]), exit_code([warning, error, ok])) == ("error", 1)
    assert (overall([]), exit_code([])) == ("ok", 0)


def test_the_checklist_has_every_check_in_order() -> None:
    checks = checklist(findings())
    assert [c.name for c in checks] == CHECKS
    assert {c.status for c in checks} == {"ok"}


def test_every_error_says_what_to_do() -> None:
    broken = findings(
        binary=CodexBinary(None, problem="no Codex binary found"),
        handshake=None,
        config=ConfigFile(HOME / "config.toml", exists=True, error="bad"),
        runtime=refused_dir("runtime directory /d is open to other users", "chmod 700 /d"),
        choice="Codex: its own, which cannot start (no Codex binary found); ...",
        choice_fails=True,
        profile_error="profile 'fast': no file /home/.codex/fast.config.toml",
    )
    checks = checklist(broken)
    # Every line fails; signed-out credentials only warn (the editor can sign in).
    assert {c.name: c.status for c in checks if c.status != "error"} == {"Credentials": "warning"}
    assert all(c.hint for c in checks)


def test_the_json_has_the_checks_and_the_verdict() -> None:
    checks = [Check("a", "ok", "fine"), Check("b", "error", "broken", "fix it")]
    assert as_json(checks) == {
        "status": "error",
        "checks": [
            {"name": "a", "status": "ok", "detail": "fine"},
            {"name": "b", "status": "error", "detail": "broken", "hint": "fix it"},
        ],
    }
    json.dumps(as_json(checks))  # plain JSON types only


def test_the_checklist_marks_each_line_and_puts_hints_under_failing_ones() -> None:
    text = render(
        [
            Check("Codex binary", "ok", "/usr/bin/codex"),
            Check("Daemon", "warning", "restarting"),
            Check("Credentials", "error", "not signed in", "codex login"),
        ]
    )
    assert text.splitlines() == [
        "✓ Codex binary  /usr/bin/codex",
        "! Daemon        restarting",
        "✗ Credentials   not signed in",
        "                → codex login",
        "",
        "1 problem (✗) blocks use; 1 warning (!).",
    ]
    assert render([Check("a", "ok", "d")]).endswith("\nNothing blocks use.\n")


# -- end to end: the command, the real Codex ------------------------------------------------------


def processes_of(codex_home: Path) -> list[int]:
    """Processes still running with this CODEX_HOME: a Codex doctor left behind."""
    marker = f"CODEX_HOME={codex_home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def clean(env: dict[str, str]) -> dict[str, str]:
    for name in ("CODEX_API_KEY", "OPENAI_API_KEY"):
        env.pop(name, None)
    return env


@pytest.mark.e2e
@pytest.mark.codex_versions
async def test_the_test_setup_passes_and_leaves_no_codex_behind(
    bridge_env: dict[str, str], codex_home: Path, codex_version: str
) -> None:
    """With either end of the tested range: no warning, and the range named."""
    code, out = await run_doctor(clean(bridge_env))
    assert code == 0, out
    assert line(out, "Codex binary").startswith("✓")
    assert f"codex-cli {codex_version} (tested: 0.169.0 to 0.171.0)" in line(out, "Codex binary")
    assert "outside the versions" not in out
    assert (
        line(out, "Credentials")
        == "✓ Credentials            custom provider mock (no login needed)"
    )
    assert line(out, "config.toml").startswith("✓") and "Codex accepts it" in out
    assert (
        line(out, "Daemon").startswith("✓")
        and "Codex: its own" not in out
        and "its own," in line(out, "Codex used")
    )
    round_trip = line(out, "initialize round trip")
    assert round_trip[0] in "✓!" and f"codex-acp-bridge/{codex_version}" in round_trip
    assert "answered in" in round_trip
    assert "✗" not in out and "Nothing blocks use" in out
    assert processes_of(codex_home) == []


@pytest.mark.e2e
async def test_json_says_the_same_as_the_checklist(bridge_env: dict[str, str]) -> None:
    code, out = await run_doctor(clean(bridge_env))
    json_code, json_out = await run_doctor(bridge_env, "--json")
    report = json.loads(json_out)
    assert json_code == code == 0
    assert set(report) == {"status", "checks"} and report["status"] in ("ok", "warning")
    marks = {"ok": "✓", "warning": "!", "error": "✗"}
    for check in report["checks"]:
        assert set(check) <= {"name", "status", "detail", "hint"}
        shown = line(out, check["name"])
        assert shown[0] == marks[check["status"]]
        if check["name"] != "initialize round trip":  # its time differs between runs
            assert shown.splitlines()[0].endswith(check["detail"])
    names = [c["name"] for c in report["checks"]]
    assert names == CHECKS


#: Configs Codex cannot load, and where its error is: a TOML syntax error, a value of the wrong
#: type, an unknown approval policy (lines of the file ``write_codex_home`` writes; the syntax
#: error is on the line appended after it, column 17).
BROKEN_CONFIGS = {
    "syntax": ("", "\n[model_providers\n", None),
    "wrong type": ("model = 3", "", "2:9"),
    "unknown policy": ('approval_policy = "sometimes"', "", "4:19"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("broken", list(BROKEN_CONFIGS))
async def test_a_config_codex_cannot_load_makes_doctor_say_what_serve_will_answer(
    bridge_env: dict[str, str],
    bridge_argv: list[str],
    codex_home: Path,
    scripted_model: ScriptedModel,
    workspace: Path,
    stderr_file: Path,
    broken: str,
) -> None:
    """Codex starts on such a config but refuses every thread/start: doctor says so, in the
    words serve's session/new answers, with Codex's one position; never "runs on defaults"."""
    extra, appended, where = BROKEN_CONFIGS[broken]
    config = write_codex_home(codex_home, scripted_model.base_url, extra_toml=extra)
    written = config.read_text()
    config.write_text(written + appended)
    if where is None:
        where = f"{len(written.splitlines()) + 2}:17"
    env = clean(bridge_env)
    code, out = await run_doctor(env)
    assert code == 1, out
    shown = line(out, "config.toml")
    assert shown.startswith("✗ config.toml") and "every new session will fail:" in shown
    assert re.findall(r":\d+:\d+:|at line \d+", shown) == [f":{where}:"], shown
    assert "defaults" not in shown
    assert f"→ fix {config}" in shown
    # What serve answers the editor's session/new: the same words.
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, env, stderr_file) as client:
            await client.initialize()
            with pytest.raises(RpcError) as refused:
                await client.new_session(str(workspace))
    quoted = shown.split("every new session will fail: ")[1].splitlines()[0]
    assert quoted.startswith(f"failed to load configuration: {config}:{where}:")
    assert refused.value.message.endswith(quoted)  # serve's "Codex: " + Codex's words
    assert list(workspace.iterdir()) == []


@pytest.mark.e2e
async def test_a_config_naming_an_unknown_provider_fails_every_session(
    bridge_env: dict[str, str], codex_home: Path, scripted_model: ScriptedModel
) -> None:
    write_codex_home(codex_home, scripted_model.base_url, extra_toml='model_provider = "nope"')
    code, out = await run_doctor(clean(bridge_env))
    assert code == 1, out
    shown = line(out, "config.toml")
    assert shown.startswith("✗") and "every new session will fail:" in shown
    assert "Model provider `nope` not found" in shown


@pytest.mark.e2e
@pytest.mark.parametrize("api_key", [None, "OPENAI_API_KEY", "CODEX_API_KEY"])
async def test_a_provider_that_needs_an_openai_login_needs_one_or_an_api_key(
    bridge_env: dict[str, str], codex_home: Path, scripted_model: ScriptedModel, api_key: str | None
) -> None:
    write_codex_home(
        codex_home,
        scripted_model.base_url,
        extra_toml="[model_providers.mock]\nrequires_openai_auth = true",
    )
    env = clean(bridge_env)
    if api_key is not None:
        env[api_key] = "sk-doctor-test"
    code, out = await run_doctor(env)
    shown = line(out, "Credentials")
    if api_key is None:
        assert code == 0, out  # the editor can still sign in through the bridge
        assert shown.startswith("! Credentials") and "not signed in" in shown
        assert "codex login" in shown and "OPENAI_API_KEY" in shown
    else:
        assert code == 0, out
        assert shown.startswith("✓") and f"${api_key}" in shown
    assert "sk-doctor-test" not in out


@pytest.mark.e2e
async def test_a_custom_provider_s_unset_env_key_blocks_use(
    bridge_env: dict[str, str], codex_home: Path, scripted_model: ScriptedModel
) -> None:
    write_codex_home(
        codex_home,
        scripted_model.base_url,
        extra_toml='[model_providers.mock]\nenv_key = "CODEX_ACP_BRIDGE_DOCTOR_KEY"',
    )
    env = clean(bridge_env)
    env.pop("CODEX_ACP_BRIDGE_DOCTOR_KEY", None)
    code, out = await run_doctor(env)
    assert code == 1, out
    assert "$CODEX_ACP_BRIDGE_DOCTOR_KEY, which is not set" in line(out, "Credentials")
    env["CODEX_ACP_BRIDGE_DOCTOR_KEY"] = "k"
    code, out = await run_doctor(env)
    assert code == 0, out


@pytest.mark.e2e
async def test_a_missing_codex_blocks_use(bridge_env: dict[str, str]) -> None:
    code, out = await run_doctor(clean(bridge_env), "--codex-bin", "/nonexistent")
    assert code == 1, out
    shown = line(out, "Codex binary")
    assert shown.startswith("✗") and "'/nonexistent' (from --codex-bin) does not exist" in shown
    assert "npm install -g @openai/codex" in shown
    assert line(out, "initialize round trip").startswith("✗ initialize round trip  not tried")


@pytest.mark.e2e
async def test_a_codex_outside_the_tested_range_warns_and_one_that_is_no_app_server_fails(
    bridge_env: dict[str, str], tmp_path: Path
) -> None:
    fake = tmp_path / "fake" / "codex"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "codex-cli 0.1.0"\n')
    fake.chmod(0o755)
    code, out = await run_doctor(clean(bridge_env), "--codex-bin", str(fake))
    assert code == 1, out
    version = line(out, "Codex binary")
    assert version.startswith("! Codex binary") and "0.1.0" in version and PINNED in version
    round_trip = line(out, "initialize round trip")
    assert round_trip.startswith("✗") and "'codex-cli 0.1.0', not JSON-RPC" in round_trip
    # Codex could not be asked: the files speak for the credentials (the scripted provider).
    assert "custom provider mock (no login needed)" in line(out, "Credentials")


@pytest.mark.e2e
async def test_a_daemon_s_runtime_directory_open_to_others_blocks_use(
    bridge_env: dict[str, str], tmp_path: Path
) -> None:
    """A daemon runs (it holds the lock, as ``daemon`` does) on a directory opened to others
    since (0755): doctor says so, and serve would not use that daemon."""
    runtime = prepare(tmp_path / "runtime-open")
    info = DaemonInfo(
        pid=os.getpid(),
        bridgeVersion=__version__,
        state="running",
        url="ws://127.0.0.1:9",
        tokenFile=str(new_token(runtime)),
        codexVersion=f"codex-cli {PINNED}",
        startedAt=time.time(),
    )
    write_info(runtime, info)
    env = clean(bridge_env)
    with hold_lock(runtime):
        runtime.chmod(0o755)
        code, out = await run_doctor(env, "--runtime-dir", str(runtime))
        assert code == 1, out
        shown = line(out, "Daemon")
        assert shown.startswith("✗ Daemon") and "mode 0755" in shown
        assert f"→ chmod 700 {runtime}" in shown
        assert "its own," in line(out, "Codex used"), out
        assert (runtime.stat().st_mode & 0o777) == 0o755, "doctor changes nothing"
        runtime.chmod(0o700)
        code, out = await run_doctor(env, "--runtime-dir", str(runtime))
        assert code == 0, out
        assert f"pid {os.getpid()}" in line(out, "Daemon") and "serve attaches to it" in out
    # The lock released: no daemon runs, whatever daemon.json says.
    code, out = await run_doctor(env, "--runtime-dir", str(runtime))
    assert "none on" in line(out, "Daemon") and "its own," in line(out, "Codex used")


@pytest.mark.e2e
async def test_a_fresh_machine_after_setup_passes_with_the_sign_in_as_a_warning(
    bridge_env: dict[str, str], tmp_path: Path
) -> None:
    """What `doctor` says right after `scripts/setup`: no config.toml, no Codex login, no key.
    Nothing blocks use (the editor offers Codex's sign-in), and it says how to sign in."""
    home = tmp_path / "empty-codex-home"
    home.mkdir()
    env = {**clean(bridge_env), "CODEX_HOME": str(home)}
    code, out = await run_doctor(env)
    assert code == 0, out
    assert line(out, "Credentials").startswith("! Credentials") and "not signed in" in out
    assert "codex-acp-bridge login" in out
    assert line(out, "config.toml").startswith("✓") and "none; Codex defaults" in out
    assert "Nothing blocks use" in out

"""Codex's config profiles: read and layered (``bridge.profiles``), offered and picked (the
engine's ``profile`` option), given to the engine (``serve``) and to a replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.codex_choice import CodexChoice, ServeOptions
from bridge.daemon.runtime import DaemonInfo, hold_lock, write_info
from bridge.doctor.checks import config_check, profile_check
from bridge.doctor.findings import ConfigFile, ConfigTrial, Handshake
from bridge.engine.features.settings._views import NO_PROFILE
from bridge.profiles import (
    ProfileError,
    Profiles,
    check_name,
    find_profiles,
    flatten,
    layer,
    load_profile,
)
from bridge.recording.format import FORMAT, VERSION, EndRecord, Header, Recording
from bridge.recording.replay import engine_options
from bridge.serve import read_profiles
from tests.test_config import H, open_session, option

# -- layering: base < profile < -c ----------------------------------------------------------------


def test_a_profile_becomes_dotted_keys_so_tables_merge_key_by_key() -> None:
    profile = {
        "model": "gpt-b",
        "model_providers": {"fast": {"name": "fast", "base_url": "http://x/v1"}},
        "sandbox_workspace_write": {"writable_roots": ["/a", "/b"]},
        "features": {},
    }
    assert flatten(profile) == {
        "model": "gpt-b",
        "model_providers.fast.name": "fast",
        "model_providers.fast.base_url": "http://x/v1",
        # A list is a value: it replaces the one below, as in Codex's layers.
        "sandbox_workspace_write.writable_roots": ["/a", "/b"],
        "features": {},
    }


def test_a_table_whose_keys_hold_a_dot_is_sent_whole() -> None:
    # Codex splits a key at every dot: "/a/b.c" could not be one part of a dotted key.
    profile = {"projects": {"/a/b.c": {"trust_level": "trusted"}}}
    assert flatten(profile) == {"projects": {"/a/b.c": {"trust_level": "trusted"}}}


def test_the_overrides_win_over_the_profile_whatever_order_codex_applies_them_in() -> None:
    profile = {
        "model": "gpt-b",
        "model_reasoning_effort": "high",
        "model_providers": {"fast": {"name": "fast", "base_url": "http://x/v1"}},
        "projects": {"/a/b.c": {"trust_level": "trusted"}},
        "tools": 1,
    }
    overrides = {
        "model": "gpt-a",
        "model_providers.fast": {"name": "mine"},
        "projects./d.trust_level": "untrusted",
        "tools.web_search": True,
    }
    assert layer(profile, overrides) == {
        "model_reasoning_effort": "high",
        # Inside a table the profile sends whole, the override is set in it.
        "projects": {"/a/b.c": {"trust_level": "trusted"}, "/d": {"trust_level": "untrusted"}},
        # Every key the overrides cover, or turn into a table, is theirs alone.
        "model": "gpt-a",
        "model_providers.fast": {"name": "mine"},
        "tools.web_search": True,
    }
    assert profile["projects"] == {"/a/b.c": {"trust_level": "trusted"}}  # not changed


def test_keys_codex_reads_only_at_its_start_are_not_sent() -> None:
    assert layer({"analytics": {"enabled": True}, "otel": {"x": 1}, "model": "m"}, {}) == {
        "model": "m"
    }


# -- the files ---------------------------------------------------------------------------------------


def test_the_profiles_of_codex_home_are_its_name_config_toml_files(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('model = "base"\n')
    (tmp_path / "fast.config.toml").write_text('model = "gpt-a"\n[features]\nx = true\n')
    (tmp_path / "deep.config.toml").write_text('model = "gpt-b"\n')
    (tmp_path / "broken.config.toml").write_text("model = \n")
    (tmp_path / "bad name.config.toml").write_text('model = "x"\n')
    found, failed = find_profiles(tmp_path)
    assert [p.name for p in found] == ["deep", "fast"]
    assert found[1].table == {"model": "gpt-a", "features": {"x": True}}
    assert found[1].path == tmp_path / "fast.config.toml"
    reasons = sorted(str(e) for e in failed)
    assert reasons[0].startswith("'bad name' is not a profile name")
    assert reasons[1].startswith(f"profile 'broken': {tmp_path / 'broken.config.toml'} is not TOML")
    assert find_profiles(tmp_path / "nowhere") == ([], [])


def test_a_missing_profile_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(tmp_path, "fast")
    assert str(caught.value) == f"profile 'fast': no file {tmp_path / 'fast.config.toml'}"


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", NO_PROFILE, "a b"])
def test_a_name_that_is_no_profile_file_is_refused(name: str) -> None:
    with pytest.raises(ProfileError, match="is not a profile name"):
        check_name(name)


# -- what serve gives the engine ---------------------------------------------------------------------

OWN = CodexChoice(None, "Codex: its own")


def _home(tmp_path: Path, **profiles: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    for name, text in profiles.items():
        (home / f"{name}.config.toml").write_text(text)
    return {"CODEX_HOME": str(home)}


def test_serve_gives_each_profile_with_the_overrides_over_it(tmp_path: Path) -> None:
    env = _home(tmp_path, fast='model = "gpt-a"\nmodel_reasoning_effort = "low"', deep="")
    options = ServeOptions(profile="fast", parsed_overrides={"model_reasoning_effort": "high"})
    profiles = read_profiles(options, OWN, env)
    assert profiles.profile == "fast"
    assert profiles.path == Path(env["CODEX_HOME"]) / "fast.config.toml"
    assert profiles.configs == {
        "deep": {"model_reasoning_effort": "high"},
        "fast": {"model": "gpt-a", "model_reasoning_effort": "high"},
    }
    assert profiles.warnings == ()
    assert profiles.says() == f"fast ({profiles.path}; from --profile)"


def test_serve_without_a_profile_still_offers_the_ones_there(tmp_path: Path) -> None:
    profiles = read_profiles(ServeOptions(), OWN, _home(tmp_path, fast='model = "gpt-a"'))
    assert (profiles.profile, list(profiles.configs)) == (None, ["fast"])
    assert profiles.says() == "none (config.toml alone)"


def test_serve_refuses_a_profile_named_that_is_not_there(tmp_path: Path) -> None:
    env = _home(tmp_path, deep="")
    with pytest.raises(ProfileError) as caught:
        read_profiles(ServeOptions(profile="fast"), OWN, env)
    assert str(caught.value) == f"profile 'fast': no file {tmp_path}/home/fast.config.toml"


def test_serve_says_what_a_profile_sets_that_no_thread_config_changes(tmp_path: Path) -> None:
    env = _home(tmp_path, fast='model = "m"\n[analytics]\nenabled = true\n')
    profiles = read_profiles(ServeOptions(profile="fast"), OWN, env)
    assert profiles.configs["fast"] == {"model": "m"}
    [warning] = profiles.warnings
    assert warning.startswith("profile 'fast' sets analytics, which Codex reads once")


def test_through_the_daemon_its_profile_is_the_one_unless_the_editor_names_one(
    tmp_path: Path,
) -> None:
    env = _home(tmp_path, fast='model = "gpt-a"', deep='model = "gpt-b"')
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)  # private, as the daemon makes it (another is not trusted)
    write_info(runtime, DaemonInfo(pid=1, bridgeVersion="x", state="running", profile="deep"))
    choice = CodexChoice(runtime, "Codex: the daemon's")
    with hold_lock(runtime):  # as the daemon does while it runs
        through = read_profiles(ServeOptions(), choice, env)
        assert (through.profile, through.source) == ("deep", "the daemon's --profile (pid 1)")
        assert read_profiles(ServeOptions(profile="fast"), choice, env).profile == "fast"
    # No daemon runs there any more: its profile is nobody's.
    assert read_profiles(ServeOptions(), choice, env).profile is None


# -- the engine: the option and the thread config ---------------------------------------------------

PROFILES = {
    "deep": {"model": "gpt-b", "model_reasoning_effort": "high"},
    "fast": {"model": "gpt-a"},
}


def _started(h: H, thread_id: str) -> dict[str, Any]:
    """``session/new``'s thread/start params, once answered (thread ``thread_id``)."""
    result = open_session(h, thread_id=thread_id)
    starts = [m for m in h.to_codex if m.get("method") == "thread/start"]
    assert result["sessionId"] == thread_id
    return starts[-1]["params"]  # type: ignore[no-any-return]


def test_without_profiles_there_is_no_profile_option() -> None:
    h = H()
    assert "profile" not in [o["id"] for o in open_session(h)["configOptions"]]


def test_the_profile_in_force_is_the_config_of_a_new_thread_and_the_options_value() -> None:
    # The overrides are in the profile's config already (serve layers them over it).
    h = H(profiles=PROFILES, profile="fast", thread_config={"x": 1})
    result = open_session(h)
    assert h.codex_request("thread/start")["params"] == {
        "cwd": "/work",
        "config": {"model": "gpt-a"},
    }
    profile = option(result["configOptions"], "profile")
    assert profile["currentValue"] == "fast"
    assert [(v["value"], v["name"]) for v in profile["options"]] == [
        (NO_PROFILE, "None"),
        ("deep", "deep"),
        ("fast", "fast"),
    ]
    assert "sessions started or loaded from now on" in profile["description"]
    h.validate()


def test_no_profile_in_force_sends_the_overrides_alone() -> None:
    h = H(profiles=PROFILES, thread_config={"model": "gpt-c"})
    assert _started(h, "t-1") == {"cwd": "/work", "config": {"model": "gpt-c"}}
    h = H(profiles=PROFILES)
    assert _started(h, "t-1") == {"cwd": "/work"}
    assert (
        option(open_session(h, thread_id="t-2")["configOptions"], "profile")["currentValue"]
        == NO_PROFILE
    )


def test_a_profile_picked_decides_the_next_thread_and_changes_nothing_in_this_one() -> None:
    h = H(profiles=PROFILES)
    _started(h, "t-1")
    _started(h, "t-2")
    sent = len(h.to_codex)
    rid = h.client_request(
        "session/set_config_option", {"sessionId": "t-1", "configId": "profile", "value": "deep"}
    )
    # Answered at once: nothing is asked of Codex for the open thread.
    assert option(h.result(rid)["configOptions"], "profile")["currentValue"] == "deep"
    assert len(h.to_codex) == sent
    # The other session shows the pick too (it is the connection's).
    [update] = [u for u in h.updates("t-2") if u["sessionUpdate"] == "config_option_update"]
    assert option(update["configOptions"], "profile")["currentValue"] == "deep"
    assert not [u for u in h.updates("t-1") if u["sessionUpdate"] == "config_option_update"]
    # The next thread starts with it; a prompt on the first goes as before.
    assert _started(h, "t-3") == {"cwd": "/work", "config": PROFILES["deep"]}
    rid = h.client_request(
        "session/prompt", {"sessionId": "t-1", "prompt": [{"type": "text", "text": "hi"}]}
    )
    assert set(h.codex_request("turn/start")["params"]) == {"threadId", "input"}
    # Back to none: config.toml alone.
    h.client_request(
        "session/set_config_option",
        {"sessionId": "t-3", "configId": "profile", "value": NO_PROFILE},
    )
    assert _started(h, "t-4") == {"cwd": "/work"}
    h.validate()


def test_a_profile_goes_with_a_load_too() -> None:
    h = H(profiles=PROFILES, profile="fast")
    h.client_request("session/load", {"sessionId": "t-9", "cwd": "/work", "mcpServers": []})
    read = h.codex_request("thread/read")
    h.codex_reply(
        read["id"],
        {"thread": {"id": "t-9", "cwd": "/work", "turns": [], "status": {"type": "notLoaded"}}},
    )
    assert h.codex_request("thread/resume")["params"]["config"] == {"model": "gpt-a"}


def test_an_unknown_profile_is_a_clear_error() -> None:
    h = H(profiles=PROFILES)
    _started(h, "t-1")
    rid = h.client_request(
        "session/set_config_option", {"sessionId": "t-1", "configId": "profile", "value": "slow"}
    )
    assert "'slow' is not a value of config option 'profile'" in h.error(rid).message
    assert _started(h, "t-2") == {"cwd": "/work"}


# -- a recording carries them -----------------------------------------------------------------------


def test_a_replay_builds_its_engine_with_the_recorded_profiles() -> None:
    def recording(**engine: Any) -> Recording:
        header = Header(format=FORMAT, version=VERSION, engine=engine)
        return Recording(path="r", header=header, entries=(), end=EndRecord(t=0, messages=0))

    options = engine_options(recording(profiles=PROFILES, profile="fast"))
    assert (options["profiles"], options["profile"]) == (PROFILES, "fast")
    old = engine_options(recording())  # made before profiles: none
    assert (old["profiles"], old["profile"]) == ({}, None)


# -- doctor's line ------------------------------------------------------------------------------------


def test_doctor_says_which_profile_and_file_are_in_force(tmp_path: Path) -> None:
    env = _home(tmp_path, fast='model = "gpt-a"', deep="")
    check = profile_check(read_profiles(ServeOptions(profile="fast"), OWN, env))
    path = Path(env["CODEX_HOME"]) / "fast.config.toml"
    assert (check.name, check.status) == ("Profile", "ok")
    assert check.detail == f"fast ({path}; from --profile); sessions may pick deep"
    missing = profile_check(Profiles(), "profile 'slow': no file /h/slow.config.toml")
    assert (missing.status, missing.detail) == (
        "error",
        "profile 'slow': no file /h/slow.config.toml",
    )
    assert missing.hint is not None


def test_doctor_answers_codexs_legacy_profile_refusal_with_the_bridges_flag() -> None:
    said = (
        'legacy `profile = "fast"` config is no longer supported; use `--profile fast` with '
        "`fast.config.toml` instead"
    )
    handshake = Handshake(seconds=0.1, config=ConfigTrial(session_error=said))
    check = config_check(ConfigFile(Path("/h/config.toml"), exists=True), handshake)
    assert check.status == "error"
    assert check.hint is not None
    assert check.hint.startswith("remove the profile key from /h/config.toml and start the bridge")
    assert "--profile fast" in check.hint

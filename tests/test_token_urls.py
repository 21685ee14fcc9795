"""A token goes only over TLS or to this machine (``bridge/token_urls.py``): the rule, and
each place that sends one (a ws:// machine's exec-server, ``--codex-url``, the doctor's
probe, the links Codex is given) refusing a plain-text URL to another host before any
connection is tried, let alone a byte sent. No traffic leaves this machine here: name
lookups and sockets are refused by the test, and counted."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge import machines as spec_of
from bridge.doctor.machine_probe import probe_ws
from bridge.engine import MachineCall
from bridge.shell.codex_transport import CodexUnavailable, connect_codex
from bridge.shell.effects import MachineAnswer
from bridge.shell.machine_files import MachineCalls
from bridge.shell.machine_link import MachineLinks
from bridge.token_urls import codex_url_refusal, is_loopback, plain_text_refusal, websocket_proxy
from tests.support.loopback import token_file

LOOPBACK = [
    "ws://127.0.0.1:4600",
    "ws://127.9.9.9:4600/path",
    "ws://[::1]:4600",
    "ws://[::ffff:127.0.0.1]:4600",
    "ws://localhost:4600",
    "ws://LOCALHOST:4600",
]
ELSEWHERE = [
    "ws://codex.example:4600",
    "ws://192.0.2.7:4600",
    "ws://0.0.0.0:4600",
    "ws://[::]:4600",
    "ws://[2001:db8::1]:4600",
    # A name is not looked up: these could resolve anywhere.
    "ws://127.0.0.1.nip.io:4600",
    "ws://localhost.codex.example:4600",
    # The host is what follows the user part.
    "ws://127.0.0.1@codex.example:4600",
    # Numbers no address parser here takes for loopback (some resolvers do).
    "ws://127.1:4600",
    "ws://2130706433:4600",
    "WS://192.0.2.7:4600",
    "ws://[unclosed:4600",
]


@pytest.mark.parametrize("url", LOOPBACK)
def test_plain_text_to_a_loopback_address_may_carry_a_token(url: str) -> None:
    assert plain_text_refusal(url) is None
    assert websocket_proxy(url) is None, "straight there, through no proxy"


@pytest.mark.parametrize("url", ELSEWHERE)
def test_plain_text_to_any_other_host_is_refused_naming_the_url(url: str) -> None:
    why = plain_text_refusal(url)
    assert why is not None and why.startswith(url) and "plain text" in why


@pytest.mark.parametrize("url", ["wss://codex.example:443", "unix:///run/codex.sock"])
def test_tls_and_unix_sockets_are_not_this_rules_to_refuse(url: str) -> None:
    assert plain_text_refusal(url) is None


def test_loopback_is_127_slash_8_ipv6s_one_and_localhost() -> None:
    assert all(is_loopback(h) for h in ["127.0.0.1", "127.255.0.3", "::1", "localhost"])
    assert not any(is_loopback(h) for h in ["128.0.0.1", "::", "10.0.0.1", "localhost."])


# -- each place a token is sent -------------------------------------------------------------


class _Refused(trio.abc.HostnameResolver, trio.abc.SocketFactory):
    """Refuses every name lookup and socket of the trio run, and keeps what was asked."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    async def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        self.asked.append(("getaddrinfo", host, port))
        raise OSError("no network in this test")

    async def getnameinfo(self, sockaddr: Any, flags: int) -> Any:
        self.asked.append(("getnameinfo", sockaddr))
        raise OSError("no network in this test")

    def socket(self, family: Any = None, kind: Any = None, proto: Any = None) -> Any:
        self.asked.append(("socket", family, kind))
        raise OSError("no sockets in this test")


@pytest.fixture
async def no_network() -> AsyncIterator[_Refused]:
    refused = _Refused()
    previous = trio.socket.set_custom_hostname_resolver(refused)
    factory = trio.socket.set_custom_socket_factory(refused)
    try:
        yield refused
    finally:
        trio.socket.set_custom_hostname_resolver(previous)
        trio.socket.set_custom_socket_factory(factory)


@pytest.fixture
def token(tmp_path: Path) -> Path:
    return token_file(tmp_path, "a-token-that-stays-here")


def _spec(url: str, token: Path) -> spec_of.MachineSpec:
    """A ws machine as nothing in the bridge would build it (``parse_url`` refuses the URL):
    the connections must refuse it themselves."""
    host = url.split("//")[1].split(":")[0]
    return spec_of.MachineSpec("lab", url, "ws", host, port=4600, token_file=str(token))


def test_the_URL_is_refused_as_the_machine_is_named(tmp_path: Path, token: Path) -> None:
    for flag in ("lab=ws://codex.example:4600", "lab=ws://192.0.2.7:4600"):
        with pytest.raises(spec_of.MachineError) as refused:
            spec_of.gather([flag], [f"lab={token}"], file=tmp_path / "none.toml")
        words = str(refused.value)
        assert words.startswith(f"machine lab: {flag[4:]} ")
        assert "use wss://" in words and "ssh://" in words
    machines_file = tmp_path / "machines.toml"
    machines_file.write_text(f'[lab]\nurl = "ws://192.0.2.7:4600"\ntoken_file = "{token}"\n')
    with pytest.raises(spec_of.MachineError, match="plain text"):
        spec_of.read_machines_file(machines_file)
    # Loopback and TLS are taken.
    [wss, local] = spec_of.gather(
        ["tls=wss://codex.example/", "here=ws://127.0.0.1:4600"],
        [f"tls={token}", f"here={token}"],
        file=tmp_path / "none.toml",
    )
    assert (wss.name, local.name) == ("tls", "here")


def test_links_refuse_a_machine_whose_token_would_go_in_plain_text(token: Path) -> None:
    with pytest.raises(spec_of.MachineError, match="use wss://"):
        MachineLinks([_spec("ws://192.0.2.7:4600", token)], ssh=["ssh"])


async def test_connect_codex_refuses_before_any_lookup_or_socket(
    no_network: _Refused, token: Path
) -> None:
    for url in ("ws://codex.example:4500", "ws://192.0.2.7:4500"):
        with pytest.raises(CodexUnavailable) as refused:
            async with connect_codex(url, token_file=str(token)):
                pytest.fail("connected")
        assert str(refused.value) == codex_url_refusal(url)
    assert no_network.asked == []
    # The same path does try the network for a loopback URL (so the refusal above is the
    # URL's, not a path that never connects).
    with pytest.raises(CodexUnavailable, match="cannot connect"):
        async with connect_codex("ws://127.0.0.1:9", token_file=str(token)):
            pytest.fail("connected")
    assert no_network.asked != []


async def test_a_machines_file_calls_refuse_before_any_lookup_or_socket(
    no_network: _Refused, token: Path
) -> None:
    calls = MachineCalls([_spec("ws://codex.example:4600", token)], ["ssh"])
    answers: list[MachineAnswer] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            done = trio.Event()

            def answered(answer: MachineAnswer) -> None:
                answers.append(answer)
                done.set()

            params = msgspec.json.encode({"path": "file:///etc/hostname"})
            calls.call(MachineCall("lab", "k1", "fs/readFile", params), answered)
            await done.wait()
            nursery.cancel_scope.cancel()
    [(result, _code, message)] = answers
    assert result is None
    assert "ws://codex.example:4600 would carry its token in plain text" in message
    assert no_network.asked == []


async def test_the_doctors_probe_refuses_before_any_lookup_or_socket(
    no_network: _Refused, token: Path
) -> None:
    found = await probe_ws(_spec("ws://codex.example:4600", token), None, reach_seconds=5)
    assert found.unreachable is not None and "plain text" in found.unreachable
    assert found.server is None
    assert no_network.asked == []


def test_serve_refuses_a_plain_text_codex_url_with_a_token_at_start(token: Path) -> None:
    url = "ws://codex.example:4500"
    argv = ["serve", "--codex-url", url, "--codex-token-file", str(token)]
    done = subprocess.run(
        [sys.executable, "-m", "bridge", *argv],
        input=b"",
        capture_output=True,
        check=False,
        timeout=30,
    )
    err = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b""
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if "plain text" in line]
    assert url in line and "use wss://" in line and "ssh -L" in line


async def test_a_loopback_exec_server_is_reached_straight_not_through_a_proxy(
    no_network: _Refused, token: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy the environment names would read the token of a plain-text connection (and
    reach its own loopback, not this machine's): a loopback ws:// goes straight there."""
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "https_proxy", "all_proxy", "ws_proxy"):
        monkeypatch.setenv(name, "http://proxy.example:3128")
    spec = spec_of.parse_url("lab", "ws://127.0.0.1:9")
    spec = spec_of.MachineSpec(**{**_fields(spec), "token_file": str(token)})
    calls = MachineCalls([spec], ["ssh"])
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            done = trio.Event()
            params = msgspec.json.encode({"path": "file:///etc/hostname"})
            calls.call(MachineCall("lab", "k1", "fs/readFile", params), lambda _a: done.set())
            await done.wait()
            nursery.cancel_scope.cancel()
    await probe_ws(spec, None, reach_seconds=5)
    asked = [a for a in no_network.asked if a[0] == "getaddrinfo"]
    assert all(a[1] not in ("proxy.example", b"proxy.example") for a in asked), asked
    assert [a for a in no_network.asked if a[0] == "socket"], "each did try to connect"


def _fields(spec: spec_of.MachineSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__dataclass_fields__}

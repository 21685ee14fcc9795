"""The machine link's listener, with a stand-in ssh that always fails: what Codex's
connections cost while a machine is down."""

from __future__ import annotations

from pathlib import Path

import trio
from websockets.exceptions import InvalidStatus
from websockets.trio.client import connect

from bridge.machines import parse_url
from bridge.shell.machine_link import DOWN_RETRY_SECONDS, MachineLinks


def counting_failing_ssh(directory: Path) -> tuple[list[str], Path]:
    """An ssh that notes each run in a file and fails as ssh does (status 255)."""
    runs = directory / "runs"
    script = directory / "ssh"
    script.write_text(
        f"#!/bin/sh\necho run >> {runs}\n"
        "echo 'ssh: connect to host devbox port 22: Connection refused' >&2\nexit 255\n"
    )
    script.chmod(0o755)
    return [str(script)], runs


async def test_while_a_machine_is_down_codexs_quick_retries_run_one_ssh_a_second(
    tmp_path: Path,
) -> None:
    ssh, runs = counting_failing_ssh(tmp_path)
    links = MachineLinks([parse_url("box", "ssh://devbox/src")], ssh=ssh)
    link = links.links["box"]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(links.run)
            headers = {"Authorization": f"Bearer {link.token}"}
            statuses = []
            # Codex tries again several times a second while its machine is away.
            for _ in range(10):
                try:
                    async with connect(link.url, additional_headers=headers) as ws:
                        await ws.wait_closed()
                    statuses.append(101)
                except InvalidStatus as refused:
                    statuses.append(refused.response.status_code)
                await trio.sleep(0.02)
            assert link.state == "down"
            assert "Connection refused" in link.reason
            # The first ran ssh and found the machine down; the rest, within a second of
            # it, were refused at once, with no ssh.
            assert runs.read_text().count("run") == 1
            assert statuses.count(503) >= 8
            await trio.sleep(DOWN_RETRY_SECONDS)
            try:
                async with connect(link.url, additional_headers=headers) as ws:
                    await ws.wait_closed()
            except InvalidStatus:
                raise AssertionError("refused after a second: never tried again") from None
            assert runs.read_text().count("run") >= 2
            nursery.cancel_scope.cancel()

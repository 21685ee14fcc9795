"""An exchange with Codex (``bridge/engine/core/exchanges.py``): each ask goes out once the one
before it is answered, the answer resumes the exchange where it asked, an error is raised there
(or answers the client request the ask names, ending the exchange)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from bridge.engine.core import exchanges
from bridge.engine.core.exchanges import All, Ask, Exchange, Refused
from bridge.engine.core.hub import Hub
from bridge.jsonrpc import RequestId, RpcError
from bridge.jsonrpc.peer import ErrorObject


class Codex:
    """Stands in for the hub: keeps each request with its two continuations, and what the
    client was refused."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any, Callable[[Any], None], Callable[[ErrorObject], None]]]
        self.asked = []
        self.refused: list[tuple[RequestId, RpcError]] = []

    def request(
        self,
        method: str,
        params: Any,
        _result: Any,
        on_result: Callable[[Any], None],
        on_error: Callable[[ErrorObject], None],
    ) -> None:
        self.asked.append((method, params, on_result, on_error))

    def machine_request(self, machine: str, method: str, *rest: Any) -> None:
        self.request(f"{machine}:{method}", *rest)

    def refuse(self, rid: RequestId, error: RpcError) -> None:
        self.refused.append((rid, error))

    @property
    def codex(self) -> Codex:
        return self

    @property
    def client(self) -> Codex:
        return self

    @property
    def hub(self) -> Hub:
        return cast(Hub, self)


def two_steps(seen: list[Any]) -> Exchange:
    first = yield Ask("list", {"a": 1})
    seen.append(first)
    try:
        second = yield Ask("stop", {"id": first})
    except Refused as refused:
        seen.append(("refused", refused.error.message))
        return
    seen.append(second)


def test_each_ask_goes_out_after_the_answer_before_it() -> None:
    codex, seen = Codex(), list[Any]()
    exchanges.start(codex.hub, two_steps(seen))
    assert [(m, p) for m, p, _, _ in codex.asked] == [("list", {"a": 1})]
    codex.asked[0][2](7)
    assert [(m, p) for m, p, _, _ in codex.asked] == [("list", {"a": 1}), ("stop", {"id": 7})]
    codex.asked[1][2]("done")
    assert seen == [7, "done"]


def test_an_error_is_raised_where_it_was_asked() -> None:
    codex, seen = Codex(), list[Any]()
    exchanges.start(codex.hub, two_steps(seen))
    codex.asked[0][2](7)
    codex.asked[1][3](ErrorObject(-32600, "no such process"))
    assert seen == [7, ("refused", "no such process")]
    assert codex.refused == []


def test_an_ask_that_names_a_client_request_answers_it_with_the_error_and_ends() -> None:
    codex, after = Codex(), list[str]()

    def logout() -> Exchange:
        yield Ask("account/logout", refuse=5)
        after.append("answered")

    exchanges.start(codex.hub, logout())
    codex.asked[0][3](ErrorObject(-32603, "keyring locked"))
    [(rid, error)] = codex.refused
    assert rid == 5 and "keyring locked" in error.message
    assert after == []


def test_an_exchange_that_asks_nothing_ends_at_once() -> None:
    codex, seen = Codex(), list[Any]()

    def nothing() -> Exchange:
        seen.append("ran")
        return
        yield Ask("never")

    exchanges.start(codex.hub, nothing())
    assert seen == ["ran"] and codex.asked == []


def test_all_sends_every_ask_at_once_and_resumes_after_the_last_with_each_outcome() -> None:
    codex, seen = Codex(), list[Any]()

    def resume_each() -> Exchange:
        outcomes = yield All((Ask("thread/resume", "a"), Ask("thread/resume", "b")))
        seen.append(outcomes)

    exchanges.start(codex.hub, resume_each())
    assert [p for _, p, _, _ in codex.asked] == ["a", "b"]
    codex.asked[1][3](ErrorObject(-32600, "no such thread"))
    assert seen == []  # one still unanswered
    codex.asked[0][2]({"ok": True})
    [(first, second)] = seen
    assert first == {"ok": True}
    assert isinstance(second, Refused) and second.method == "thread/resume"
    assert second.error.message == "no such thread"


def test_all_of_nothing_resumes_at_once() -> None:
    codex, seen = Codex(), list[Any]()

    def none() -> Exchange:
        seen.append((yield All(())))

    exchanges.start(codex.hub, none())
    assert seen == [[]] and codex.asked == []


def test_an_ask_naming_a_machine_goes_to_its_exec_server() -> None:
    codex, seen = Codex(), list[Any]()

    def read_there() -> Exchange:
        seen.append((yield Ask("fs/readFile", {"path": "/a"}, machine="box")))
        seen.append((yield Ask("thread/revert", {"threadId": "t"})))

    exchanges.start(codex.hub, read_there())
    codex.asked[0][2]("text")
    codex.asked[1][2]({})
    assert [m for m, _, _, _ in codex.asked] == ["box:fs/readFile", "thread/revert"]
    assert seen == ["text", {}]

"""An engine harness whose client declared given capabilities, every message validated
against ACP's schema and the proposals' fragment (unit tests only)."""

from __future__ import annotations

from typing import Any

from .acp_schema import ConversationValidator
from .engine_harness import Harness

CWD = "/w"


class Client(Harness):
    """Initialized in ACP ``version`` with client ``capabilities``."""

    def __init__(self, version: int, capabilities: dict[str, Any]) -> None:
        super().__init__()
        self.version = version
        self.sent: dict[int, str] = {}
        if version == 2:
            params: dict[str, Any] = {"protocolVersion": 2, "capabilities": capabilities}
        else:
            params = {"protocolVersion": 1, "clientCapabilities": capabilities}
        #: ``initialize``: its request id and its result.
        self.init_id = self.client_request("initialize", params)
        self.init = self.result(self.init_id)

    def client_request(self, method: str, params: Any) -> int:
        rid = super().client_request(method, params)
        self.sent[rid] = method
        return rid

    def caps(self) -> dict[str, Any]:
        result = self.init
        if self.version == 2:
            return result["capabilities"]["session"]  # type: ignore[no-any-return]
        return result["agentCapabilities"]["sessionCapabilities"]  # type: ignore[no-any-return]

    def list_page(self, *threads: dict[str, Any]) -> list[dict[str, Any]]:
        rid = self.client_request("session/list", {"cwd": CWD})
        self.codex_reply(self.codex_request("thread/list")["id"], {"data": list(threads)})
        response = self.client_response(rid)
        assert response is not None, "session/list unanswered"
        return response["result"]["sessions"]  # type: ignore[no-any-return]

    def hints(self, method: str) -> list[Any]:
        return [m["params"] for m in self.to_client if m.get("method") == method]

    def validate(self) -> None:
        validator = ConversationValidator(version=self.version, unstable=self.version == 2)
        for rid, method in self.sent.items():
            validator.client_sent({"id": rid, "method": method})
        for message in self.to_client:
            validator.agent_sent(message)

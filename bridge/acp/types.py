"""ACP v1 messages the bridge reads and writes.

Hand-written from the official ACP JSON Schema (``tests/schemas/acp/v1``), only
for what the bridge uses; every message the bridge sends is validated against
that schema in the tests. Conventions:

- field names are the wire's camelCase (``rename="camel"`` where Python
  differs), ``_meta`` is ``meta`` renamed;
- ``UNSET`` means "absent on the wire", distinct from ``None`` (``null``): the
  RFD's patch semantics depend on the difference;
- unknown fields are ignored on decode; unknown content block variants are
  kept as :class:`UnknownContent` (see :func:`decode_content_blocks`) so a
  newer client never breaks the bridge.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..wire import WireStruct as _Base
from ..wire import lazy_decoder

PROTOCOL_VERSION = 1

Meta: TypeAlias = dict[str, Any] | None | UnsetType


# -- content ---------------------------------------------------------------


class TextContent(_Base, tag="text", tag_field="type"):
    text: str
    annotations: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ImageContent(_Base, tag="image", tag_field="type"):
    data: str
    mimeType: str
    uri: str | None | UnsetType = UNSET
    annotations: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class AudioContent(_Base, tag="audio", tag_field="type"):
    data: str
    mimeType: str
    annotations: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ResourceLink(_Base, tag="resource_link", tag_field="type"):
    uri: str
    name: str
    title: str | None | UnsetType = UNSET
    description: str | None | UnsetType = UNSET
    mimeType: str | None | UnsetType = UNSET
    size: int | None | UnsetType = UNSET
    annotations: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class TextResourceContents(_Base):
    uri: str
    text: str
    mimeType: str | None | UnsetType = UNSET


class BlobResourceContents(_Base):
    uri: str
    blob: str
    mimeType: str | None | UnsetType = UNSET


class EmbeddedResource(_Base, tag="resource", tag_field="type"):
    # Text or blob, told apart by which member is present (see decode below).
    resource: dict[str, Any]
    annotations: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")

    def contents(self) -> TextResourceContents | BlobResourceContents:
        if "text" in self.resource:
            return msgspec.convert(self.resource, TextResourceContents)
        return msgspec.convert(self.resource, BlobResourceContents)


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
)


class UnknownContent(msgspec.Struct):
    """A content block of a type this bridge does not know (kept, not dropped)."""

    type: str
    raw: dict[str, Any]


_content_decoder = msgspec.json.Decoder(list[Raw])
_block_decoder = lazy_decoder(ContentBlock)
_KNOWN_BLOCKS = {"text", "image", "audio", "resource_link", "resource"}


class _Tag(msgspec.Struct):
    type: str = ""


_tag_decoder = msgspec.json.Decoder(_Tag)


def decode_content_block(raw: Raw | bytes) -> ContentBlock | UnknownContent:
    """Decode one block; a known type with bad fields raises ``ValidationError``."""
    tag = _tag_decoder.decode(raw).type
    if tag not in _KNOWN_BLOCKS:
        return UnknownContent(tag, msgspec.json.decode(raw))
    block: ContentBlock = _block_decoder().decode(raw)
    if isinstance(block, EmbeddedResource):
        block.contents()  # validate now, so errors name the prompt, not later code
    return block


# -- initialize --------------------------------------------------------------


class Implementation(_Base):
    name: str
    version: str
    title: str | None | UnsetType = UNSET


class FileSystemCapabilities(_Base):
    readTextFile: bool = False
    writeTextFile: bool = False


class ClientCapabilities(_Base):
    fs: FileSystemCapabilities = msgspec.field(default_factory=FileSystemCapabilities)
    terminal: bool = False
    # Unstable: the Subagent Sessions RFD. A non-null object means supported.
    subagents: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None
    session: dict[str, Any] | None = None
    #: Unstable: ``{}`` when the client takes ``plan_update`` (and ``plan_removed``).
    plan: dict[str, Any] | None = None
    #: ``{"terminal": true}``: the client can run the agent in a terminal to sign in.
    auth: dict[str, Any] | None = None
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class InitializeParams(_Base):
    protocolVersion: int
    clientCapabilities: ClientCapabilities = msgspec.field(default_factory=ClientCapabilities)
    clientInfo: Implementation | None = None


class PromptCapabilities(_Base):
    image: bool = False
    audio: bool = False
    embeddedContext: bool = False


class McpCapabilities(_Base):
    http: bool = False
    sse: bool = False


class AgentCapabilities(_Base):
    loadSession: bool = False
    promptCapabilities: PromptCapabilities = msgspec.field(default_factory=PromptCapabilities)
    mcpCapabilities: McpCapabilities = msgspec.field(default_factory=McpCapabilities)
    sessionCapabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Unstable: ``providers/list|set|disable`` (see bridge.acp.providers).
    providers: dict[str, Any] | UnsetType = UNSET
    #: The quotas proposal (see bridge.acp.quota).
    quota: dict[str, Any] | UnsetType = UNSET
    #: ``logout`` (stable), ``status`` (unstable: ``auth/status``).
    auth: dict[str, Any] | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class AuthEnvVar(_Base):
    name: str
    label: str | UnsetType = UNSET
    secret: bool | UnsetType = UNSET
    optional: bool | UnsetType = UNSET


class AuthMethod(_Base):
    """One way to sign in. ``type`` left out is ``agent`` (the agent does it, through
    ``authenticate``); ``terminal`` names ``args`` for the client to run the agent with in a
    terminal; ``env_var`` (draft) names the variables the client may set for it."""

    id: str
    name: str
    description: str | None | UnsetType = UNSET
    type: str | UnsetType = UNSET
    args: list[str] | UnsetType = UNSET
    vars: list[AuthEnvVar] | UnsetType = UNSET


class InitializeResult(_Base):
    protocolVersion: int
    agentCapabilities: AgentCapabilities
    authMethods: list[AuthMethod] = msgspec.field(default_factory=list)
    agentInfo: Implementation | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- sessions -----------------------------------------------------------------


class NewSessionParams(_Base):
    cwd: str
    mcpServers: list[dict[str, Any]]
    additionalDirectories: list[str] | None = None


class NewSessionResult(_Base):
    sessionId: str
    modes: Any = UNSET
    configOptions: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class PromptParams(_Base):
    sessionId: str
    prompt: list[Raw]


StopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"
]


class Usage(_Base):
    """The tokens one prompt's work used (unstable ``Usage``: not the session's total)."""

    totalTokens: int
    inputTokens: int
    outputTokens: int
    thoughtTokens: int | None | UnsetType = UNSET
    cachedReadTokens: int | None | UnsetType = UNSET
    cachedWriteTokens: int | None | UnsetType = UNSET


class PromptResult(_Base):
    stopReason: StopReason
    #: The tokens the prompt's turn used (unstable; ``UNSET`` when Codex reported none).
    usage: Usage | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class CancelParams(_Base):
    sessionId: str


class CancelRequestParams(_Base):
    """``$/cancel_request``: the id of a request the sender made."""

    requestId: int | str


# -- session/update -------------------------------------------------------------


class ContentChunk(_Base):
    """A streamed piece of a message (ACP's ``ContentChunk``): every chunk of one message
    has its ``messageId``. The three updates below are this, tagged."""

    content: ContentBlock
    messageId: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class AgentMessageChunk(ContentChunk, tag="agent_message_chunk", tag_field="sessionUpdate"):
    pass


class AgentThoughtChunk(ContentChunk, tag="agent_thought_chunk", tag_field="sessionUpdate"):
    pass


class UserMessageChunk(ContentChunk, tag="user_message_chunk", tag_field="sessionUpdate"):
    pass


class Cost(_Base):
    amount: float
    currency: str


class UsageUpdate(_Base, tag="usage_update", tag_field="sessionUpdate"):
    used: int
    size: int
    #: The session's cost so far, where Codex estimates it (never a made-up zero).
    cost: Cost | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


SessionUpdate: TypeAlias = AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | UsageUpdate


class SessionNotification(_Base):
    sessionId: str
    # Any update Struct tagged with ``sessionUpdate``: the variants live with the
    # feature that sends them (``bridge/acp/*.py``); the bridge never decodes updates.
    update: msgspec.Struct


class Notice(_Base, tag="notice", tag_field="sessionUpdate"):
    """Fire-and-forget information (unstable): only for clients declaring ``session.notices``."""

    severity: str
    title: str
    description: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")

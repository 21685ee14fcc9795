"""ACP prompt content blocks → Codex ``turn/start`` input.

Codex takes text and images; everything else a client may attach is turned
into text Codex can read (links and embedded files), or refused with an error
that names the offending block, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from msgspec import Raw

from ....acp import types as acp_types
from ....codex import types as codex_types
from ....jsonrpc import RpcError


def prompt_to_input(blocks: Sequence[Raw]) -> list[codex_types.UserInput]:
    """Translate a ``session/prompt``'s blocks; raise ``RpcError`` (-32602) on bad ones."""
    out: list[codex_types.UserInput] = []
    for index, raw in enumerate(blocks):
        where = f"prompt[{index}]"
        try:
            block = acp_types.decode_content_block(raw)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise RpcError.invalid_params(f"{where}: {exc}") from None
        out.append(_block_to_input(block, where))
    if not out:
        raise RpcError.invalid_params("prompt: must contain at least one content block")
    check_size(out)
    return out


#: Most characters of text Codex takes in one input (its -32602 ``input_too_large``
#: names it as ``max_chars``; measured with Codex 0.169). Images do not count.
MAX_INPUT_CHARS = 1_048_576
#: Largest message Codex's WebSocket (``--listen``, its daemon's socket) takes: a bigger
#: one makes it drop the whole connection, every session on it (measured with 0.169:
#: 16 MiB). Less a margin for the rest of the ``turn/start`` around the input.
MAX_INPUT_BYTES = 16 * 1024 * 1024 - 64 * 1024


def check_size(inputs: list[codex_types.UserInput]) -> None:
    """Refuse (-32602, naming the limit) an input Codex would not accept, before it is
    sent: too much text, or a message its WebSocket would drop the connection over."""
    chars = sum(len(item.text) for item in inputs if isinstance(item, codex_types.TextInput))
    if chars > MAX_INPUT_CHARS:
        raise RpcError.invalid_params(
            f"prompt: {chars} characters of text; Codex accepts at most {MAX_INPUT_CHARS}"
        )
    size = len(msgspec.json.encode(inputs))
    if size > MAX_INPUT_BYTES:
        raise RpcError.invalid_params(
            f"prompt: {size} bytes as Codex's input; Codex accepts at most {MAX_INPUT_BYTES} "
            "bytes in one message (16 MiB, less the rest of the request)"
        )


def _block_to_input(
    block: acp_types.ContentBlock | acp_types.UnknownContent, where: str
) -> codex_types.UserInput:
    match block:
        case acp_types.TextContent(text=text):
            return codex_types.TextInput(text=text)
        case acp_types.ImageContent(data=data, mimeType=mime):
            return codex_types.ImageInput(url=f"data:{mime};base64,{data}")
        case acp_types.ResourceLink(uri=uri, name=name):
            return codex_types.TextInput(text=f"[@{name}]({uri})")
        case acp_types.EmbeddedResource():
            contents = block.contents()
            if isinstance(contents, acp_types.TextResourceContents):
                return codex_types.TextInput(
                    text=f'<context ref="{contents.uri}">\n{contents.text}\n</context>'
                )
            mime = contents.mimeType if isinstance(contents.mimeType, str) else ""
            if mime.startswith("image/"):
                return codex_types.ImageInput(url=f"data:{mime};base64,{contents.blob}")
            raise RpcError.invalid_params(
                f"{where}: embedded binary resource {contents.uri!r} of type "
                f"{mime or 'unknown'} is not supported (only text and images)"
            )
        case acp_types.AudioContent():
            raise RpcError.invalid_params(f"{where}: audio content is not supported by Codex")
        case acp_types.UnknownContent(type=kind):
            raise RpcError.invalid_params(f"{where}: unknown content block type {kind!r}")
    raise AssertionError(f"unhandled block {block!r}")  # pragma: no cover

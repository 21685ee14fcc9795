"""ACP prompt content blocks → Codex ``turn/start`` input.

Codex takes text and images; everything else a client may attach is turned
into text Codex can read (links and embedded files), or refused with an error
that names the offending block, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from msgspec import Raw

from ..acp import types as acp
from ..codex import types as codex
from ..jsonrpc import RpcError


def prompt_to_input(blocks: Sequence[Raw]) -> list[codex.UserInput]:
    """Translate a ``session/prompt``'s blocks; raise ``RpcError`` (-32602) on bad ones."""
    out: list[codex.UserInput] = []
    for index, raw in enumerate(blocks):
        where = f"prompt[{index}]"
        try:
            block = acp.decode_content_block(raw)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise RpcError.invalid_params(f"{where}: {exc}") from None
        out.append(_block_to_input(block, where))
    if not out:
        raise RpcError.invalid_params("prompt: must contain at least one content block")
    return out


def _block_to_input(block: acp.ContentBlock | acp.UnknownContent, where: str) -> codex.UserInput:
    match block:
        case acp.TextContent(text=text):
            return codex.TextInput(text=text)
        case acp.ImageContent(data=data, mimeType=mime):
            return codex.ImageInput(url=f"data:{mime};base64,{data}")
        case acp.ResourceLink(uri=uri, name=name):
            return codex.TextInput(text=f"[@{name}]({uri})")
        case acp.EmbeddedResource():
            contents = block.contents()
            if isinstance(contents, acp.TextResourceContents):
                return codex.TextInput(
                    text=f'<context ref="{contents.uri}">\n{contents.text}\n</context>'
                )
            mime = contents.mimeType if isinstance(contents.mimeType, str) else ""
            if mime.startswith("image/"):
                return codex.ImageInput(url=f"data:{mime};base64,{contents.blob}")
            raise RpcError.invalid_params(
                f"{where}: embedded binary resource {contents.uri!r} of type "
                f"{mime or 'unknown'} is not supported (only text and images)"
            )
        case acp.AudioContent():
            raise RpcError.invalid_params(f"{where}: audio content is not supported by Codex")
        case acp.UnknownContent(type=kind):
            raise RpcError.invalid_params(f"{where}: unknown content block type {kind!r}")
    raise AssertionError(f"unhandled block {block!r}")  # pragma: no cover

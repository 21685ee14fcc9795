"""ACP prompt content blocks → Codex ``turn/start`` input.

Codex takes text and images; everything else a client may attach is turned
into text Codex can read (links and embedded files), or refused with an error
that names the offending block, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from msgspec import Raw

from ..acp import types as acp_types
from ..codex import types as codex_types
from ..jsonrpc import RpcError


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
    return out


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

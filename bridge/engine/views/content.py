"""Text as ACP tool-call content: a text block, a Markdown code block no line can close."""

from __future__ import annotations

import re

from ...acp import tools as acp_tools
from ...acp import types as acp_types


def text_content(text: str) -> acp_tools.Content:
    return acp_tools.Content(content=acp_types.TextContent(text=text))


def fenced(text: str, info: str = "") -> str:
    """``text`` as a Markdown code block whose fence no line of it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}"

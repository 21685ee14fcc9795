"""The one base of every wire Struct, ACP's and Codex's alike.

Fields carry the protocol's names and are passed by keyword; a field at its default
(``UNSET``, mostly) is left out of what is sent; members a Struct does not name are
ignored when it is decoded (msgspec's default), so a newer peer's additions do no harm.
"""

from __future__ import annotations

import msgspec


class WireStruct(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass

"""The one base of every wire Struct, ACP's and Codex's alike.

Fields carry the protocol's names and are passed by keyword; a field at its default
(``UNSET``, mostly) is left out of what is sent; members a Struct does not name are
ignored when it is decoded (msgspec's default), so a newer peer's additions do no harm.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType

import msgspec


class WireStruct(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


def modules_of(package: ModuleType) -> list[ModuleType]:
    """The modules of a package that are imported (every one the bridge uses is)."""
    prefix = package.__name__ + "."
    return [module for name, module in list(sys.modules.items()) if name.startswith(prefix)]


def declared(modules: Iterable[ModuleType], suffix: str) -> list[type[msgspec.Struct]]:
    """The Structs these modules declare (not import) whose names end in ``suffix``:
    ``"Params"``, ``"Result"``, by the protocols' own naming."""
    return [
        kind
        for module in modules
        for name, kind in vars(module).items()
        if name.endswith(suffix)
        and isinstance(kind, type)
        and issubclass(kind, msgspec.Struct)
        and kind.__module__ == module.__name__
    ]

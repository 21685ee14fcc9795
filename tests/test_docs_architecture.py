"""docs/architecture.md against the code: its module table names every engine module once (and
nothing that is gone), its record table every field of the thread record, and every file path
it names in backticks exists.

The document is how a newcomer walks the engine; these checks keep it from drifting the
way it did before (a module or a field added without a word there fails here).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from bridge.engine.core.threads import ThreadRecord

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
ENGINE = ROOT / "bridge" / "engine"
#: Where a path the document names may start, as the document says.
BASES = (ENGINE, ROOT / "bridge", ROOT)

_CODE = re.compile(r"`([^`]+)`")
#: A fenced block (the picture): its backticks would pair with the inline ones after it.
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n") + len(heading) + 1
    ends = [
        m.start()
        for m in re.finditer(r"^(#+) ", text[start:], re.MULTILINE)
        if len(m.group(1)) <= level
    ]
    return text[start : start + ends[0]] if ends else text[start:]


def _first_cells(section: str) -> list[str]:
    """The first cell of each row of the tables in ``section`` (header and rule excluded)."""
    cells = []
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        cells.append(line.split("|")[1].strip())
    return cells[1:] if cells else cells


def module_mentions(text: str) -> list[str]:
    """The modules the module table's first column names, in order, repeats kept."""
    section = _section(text, "### The modules")
    return [n for cell in _first_cells(section) for n in _CODE.findall(cell) if n.endswith(".py")]


def documented_modules(text: str) -> set[str]:
    return set(module_mentions(text))


def named_paths(text: str) -> set[str]:
    """Every backticked file path of the document: a ``.py`` file, or anything under
    ``bridge/``, ``tests/``, ``tools/`` or ``scripts/`` (a glob like ``tests/test_e2e_*.py`` too)."""
    return {
        name
        for name in _CODE.findall(_FENCE.sub("", text))
        if not any(c.isspace() for c in name)
        and (name.endswith(".py") or name.startswith(("bridge/", "tests/", "tools/", "scripts/")))
    }


def missing_paths(text: str, bases: tuple[Path, ...]) -> list[str]:
    """The paths the document names that exist under none of ``bases``."""

    def exists(base: Path, name: str) -> bool:
        if "*" in name:
            return any(base.glob(name))
        return (base / name).exists()

    return sorted(name for name in named_paths(text) if not any(exists(b, name) for b in bases))


def engine_modules() -> set[str]:
    return {
        path.relative_to(ENGINE).as_posix()
        for path in ENGINE.rglob("*.py")
        if path.name != "__init__.py"
    }


def documented_fields(text: str) -> set[str]:
    section = _section(text, "### The thread record")
    names = set()
    for cell in _first_cells(section):
        if cell == "field":
            continue
        # "`a`, `b` → `view`": what follows the arrow is derived from the fields, not one.
        names.update(_CODE.findall(cell.split("→")[0]))
    return names


def test_the_module_table_names_every_engine_module() -> None:
    documented = documented_modules(DOC.read_text())
    actual = engine_modules()
    assert not actual - documented, (
        f"modules missing from docs/architecture.md: {sorted(actual - documented)}"
    )
    assert not documented - actual, (
        f"docs/architecture.md names modules that are gone: {sorted(documented - actual)}"
    )


def test_the_module_table_names_each_module_once() -> None:
    mentions = module_mentions(DOC.read_text())
    repeated = sorted({name for name in mentions if mentions.count(name) > 1})
    assert not repeated, (
        f"docs/architecture.md's module table names these more than once: {repeated}"
    )


def test_every_path_the_document_names_exists() -> None:
    missing = missing_paths(DOC.read_text(), BASES)
    assert not missing, f"docs/architecture.md names files that are not there: {missing}"


def test_the_record_table_names_every_field_of_the_thread_record() -> None:
    documented = documented_fields(DOC.read_text())
    actual = {f.name for f in dataclasses.fields(ThreadRecord)}
    assert not actual - documented, (
        f"ThreadRecord fields missing from docs/architecture.md: {sorted(actual - documented)}"
    )
    assert not documented - actual, (
        f"docs/architecture.md names fields ThreadRecord lacks: {sorted(documented - actual)}"
    )


def test_the_checks_see_a_missing_row() -> None:
    text = (
        "### The modules\n\n| module | what |\n| --- | --- |\n| `core/a.py`, `b.py` | x |\n\n"
        "### The thread record\n\n| field | what |\n| --- | --- |\n| `id`, `x` → `view` | y |\n"
        "## Next\n| `c.py` | not in the section |\n"
    )
    assert documented_modules(text) == {"core/a.py", "b.py"}
    assert documented_fields(text) == {"id", "x"}
    repeated = "### The modules\n\n| m | w |\n| - | - |\n| `a.py` | x |\n| `a.py`, `b.py` | y |\n"
    assert module_mentions(repeated) == ["a.py", "a.py", "b.py"]


def test_the_path_check_sees_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "engine" / "core").mkdir(parents=True)
    (tmp_path / "engine" / "core" / "hub.py").touch()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_e2e_a.py").touch()
    text = (
        "```\nA picture ─▶ B\n```\n"
        "`core/hub.py` and `tests/test_e2e_*.py` are there; `core/gone.py`, `bridge/x/` and "
        "`tests/test_none_*.py` are not; `hub.client.update(a, b)` and `session/prompt` are no paths."
    )
    bases = (tmp_path / "engine", tmp_path)
    assert missing_paths(text, bases) == ["bridge/x/", "core/gone.py", "tests/test_none_*.py"]


#: ``Class.name`` in backticks (``Engine.forget``, ``Prompts.start_turn()``).
_MEMBER = re.compile(r"`([A-Z][A-Za-z0-9_]*)\.([a-z_][A-Za-z0-9_]*)(?:\(\))?`")


def class_members(root: Path) -> dict[str, set[str]]:
    """Each class under ``root`` by name, with the names it defines: methods, class-level
    names and fields, and attributes its methods set on ``self`` (classes of one name
    pooled)."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            names = found.setdefault(node.name, set())
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
            for inner in ast.walk(node):
                targets = (
                    inner.targets
                    if isinstance(inner, ast.Assign)
                    else [inner.target]
                    if isinstance(inner, ast.AnnAssign | ast.AugAssign)
                    else []
                )
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        names.add(target.attr)
    return found


def missing_members(text: str, classes: dict[str, set[str]]) -> list[str]:
    """The ``Class.name`` the document names that no class of that name defines."""
    named = {(c, n) for c, n in _MEMBER.findall(_FENCE.sub("", text))}
    return sorted(f"{c}.{n}" for c, n in named if n not in classes.get(c, set()))


def test_every_class_member_the_document_names_exists() -> None:
    missing = missing_members(DOC.read_text(), class_members(ROOT / "bridge"))
    assert not missing, f"docs/architecture.md names what the code does not have: {missing}"


def test_the_member_check_sees_a_name_that_is_gone() -> None:
    classes = class_members(ROOT / "bridge" / "engine")
    text = (
        "`Engine.forget` and `ClientLink.update()` are; `Engine.vanished` and `Nowhere.x` are not."
    )
    assert missing_members(text, classes) == ["Engine.vanished", "Nowhere.x"]

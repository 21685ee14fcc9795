"""The architecture, pinned: import cycles, a pure engine, features wired in one place.

Static checks on the source (``ast``; no module of the tree is imported but
``bridge`` itself, for its path): a function-level or ``if TYPE_CHECKING:``
import counts like any other, since it is still a dependency someone has to
reason about, and a lazy import only hides a cycle until it bites.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import bridge

PACKAGE_DIR = Path(bridge.__file__).resolve().parent

# Where the features live: a module there with a class built on the hub (its first
# argument, or a dataclass's first field, is ``hub``) is a feature when the wiring module
# imports it, else a part of the one feature that reaches it (see feature_map).
FEATURES_PACKAGE = "bridge.engine.features"
# The one engine module allowed to build the features, and the wiring's routing tables,
# which name their handlers (the two modules that may import the feature modules).
WIRING_MODULE = "bridge.engine.engine"
ROUTES_MODULE = "bridge.engine.routes"

ENGINE = "bridge.engine"
# The engine's rooms (its folders) and the rooms each may import: one way, from the
# core up. The wiring module sits above the rooms and imports them all; a face reaches
# a feature only through objects the wiring hands it.
ROOM_IMPORTS: dict[str, set[str]] = {
    "core": set(),
    "views": {"core"},
    "features": {"core", "views"},
    "faces": {"core", "views"},
}
# I/O, processes, clocks and concurrency belong to the shell; the engine only
# maps messages to messages, so replays are deterministic.
ENGINE_FORBIDDEN = (
    "trio",
    "websockets",
    "socket",
    "subprocess",
    "os",
    "os.path",
    "time",
    "asyncio",
    "pathlib",
    "select",
    "threading",
    "bridge.shell",
    "bridge.cli",
    "bridge.recording",
)


# -- the checker ------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    importer: str
    #: The dotted name imported; for modules of the scanned package, resolved to one.
    target: str
    line: int


def find_modules(package_dir: Path) -> dict[str, Path]:
    """Every module of the package, by dotted name; a package is its ``__init__``."""
    modules: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(name: str, modules: Mapping[str, Path]) -> str:
    """The longest prefix of ``name`` that is a module of the package (``name`` if none is)."""
    candidate = name
    while candidate:
        if candidate in modules:
            return candidate
        candidate = candidate.rpartition(".")[0]
    return name


def imports_of(module: str, modules: Mapping[str, Path]) -> list[Import]:
    """Everything ``module`` imports, anywhere in its body (functions, TYPE_CHECKING too)."""
    path = modules[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # The package a relative import starts from: a package's __init__ is its own.
    package = module if _is_package(path) else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module, _resolve(alias.name, modules), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level - 1 >= len(base_parts):
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the package")
                base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
                if node.module:
                    base = f"{base}.{node.module}"
            else:
                assert node.module is not None  # only relative imports can omit it
                base = node.module
            for alias in node.names:
                # `from pkg import name` imports the module pkg.name when there is one.
                sub = f"{base}.{alias.name}"
                target = sub if sub in modules else _resolve(base, modules)
                found.append(Import(module, target, node.lineno))
    # ast.walk is breadth-first; report in the order a reader meets them.
    return sorted(found, key=lambda imp: imp.line)


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (other packages left out)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name in modules:
        for imp in imports_of(name, modules):
            # A self-reference (`from . import __version__` in a package's own
            # __init__) runs nothing new, so it is no cycle.
            if imp.target in modules and imp.target != name:
                graph[name].add(imp.target)
    return graph


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on deep graphs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _shortest_cycle_through(
    start: str, graph: Mapping[str, set[str]], within: set[str]
) -> list[str]:
    """Breadth-first from ``start`` back to it, staying in its component."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node] & within):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in a component but on no cycle")


def find_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """For every module on a cycle, the shortest cycle through it (each cycle once).

    Not every elementary cycle (there can be exponentially many), but every
    module of every strongly connected component shows up in at least one.
    """
    cycles: list[list[str]] = []
    for component in _strongly_connected(graph):
        if len(component) == 1:
            continue  # self-edges are dropped, so a single module is on no cycle
        members = set(component)
        for start in component:
            ring = _shortest_cycle_through(start, graph, members)[:-1]
            # Start each at its smallest module, so one cycle reads one way only.
            first = ring.index(min(ring))
            ring = ring[first:] + ring[:first]
            cycle = [*ring, ring[0]]
            if cycle not in cycles:
                cycles.append(cycle)
    return cycles


def folder_graph(graph: Mapping[str, Iterable[str]], package: str) -> dict[str, set[str]]:
    """The import graph among ``package``'s direct children: each sub-folder with all it
    holds as one node, each module beside them as its own; imports within a node and
    from outside ``package`` are left out."""

    def node(module: str) -> str | None:
        if not module.startswith(f"{package}."):
            return None
        return f"{package}.{module[len(package) + 1 :].split('.')[0]}"

    folded: dict[str, set[str]] = {}
    for importer, targets in graph.items():
        source = node(importer)
        if source is None:
            continue
        folded.setdefault(source, set())
        for target in targets:
            into = node(target)
            if into is not None and into != source:
                folded[source].add(into)
                folded.setdefault(into, set())
    return folded


def cycle_report(cycles: list[list[str]]) -> str:
    return "\n".join(" -> ".join(cycle) for cycle in cycles)


def importers_of(module: str, graph: Mapping[str, Iterable[str]]) -> list[str]:
    return sorted(name for name, targets in graph.items() if module in targets)


def hub_classes(path: Path) -> list[str]:
    """The classes of a module built on the hub: ``__init__(self, hub, ...)``, or a
    dataclass whose first field is ``hub``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        dataclass = any("dataclass" in ast.unparse(decorator) for decorator in node.decorator_list)
        fields = [i for i in node.body if isinstance(i, ast.AnnAssign)]
        inits = [i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"]
        if inits:
            params = inits[0].args.args
            first = params[1].arg if len(params) > 1 else None
        elif dataclass and fields and isinstance(fields[0].target, ast.Name):
            first = fields[0].target.id
        else:
            first = None
        if first == "hub":
            found.append(node.name)
    return found


def built_classes(module: str, modules: Mapping[str, Path]) -> dict[str, str]:
    """The classes ``module`` calls (builds) that it imported by name: class -> the module
    it came from."""
    path = modules[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if _is_package(path) else module.rpartition(".")[0]
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level and node.module:
            parts = package.split(".")
            base = ".".join([*parts[: len(parts) - (node.level - 1)], node.module])
            for alias in node.names:
                imported[alias.asname or alias.name] = _resolve(base, modules)
    return {
        node.func.id: imported[node.func.id]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in imported
        and node.func.id[:1].isupper()
    }


def feature_map(
    modules: Mapping[str, Path],
    graph: Mapping[str, Iterable[str]],
    *,
    package: str = FEATURES_PACKAGE,
    wiring: str = WIRING_MODULE,
) -> tuple[list[str], dict[str, set[str]]]:
    """The features (modules of ``package`` with a class on the hub that ``wiring``
    imports), and each other such module (a part) -> the features that reach it through
    modules of ``package`` that are no feature."""
    on_hub = sorted(m for m in modules if m.startswith(f"{package}.") and hub_classes(modules[m]))
    features = [m for m in on_hub if m in graph.get(wiring, ())]
    owners: dict[str, set[str]] = {m: set() for m in on_hub if m not in features}
    for feature in features:
        seen, todo = {feature}, [feature]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target.startswith(f"{package}.") and target not in seen | set(features):
                    seen.add(target)
                    todo.append(target)
                    if target in owners:
                        owners[target].add(feature)
    return features, owners


def room_violations_in_features(
    modules: Mapping[str, Path],
    graph: Mapping[str, Iterable[str]],
    *,
    package: str = FEATURES_PACKAGE,
    wiring: str = WIRING_MODULE,
) -> list[str]:
    """What breaks the layout of ``package``: every module lives in a room (a subpackage);
    a room's public modules are the features the wiring builds, its private ones (``_name``)
    their parts and helpers, imported only from inside the room."""
    features, owners = feature_map(modules, graph, package=package, wiring=wiring)
    depth = package.count(".") + 1
    found: list[str] = []
    for name in sorted(m for m in modules if m.startswith(f"{package}.")):
        parts = name.split(".")
        room = ".".join(parts[: depth + 1])
        if len(parts) == depth + 1 and not _is_package(modules[name]):
            found.append(f"{name}: outside a room")
            continue
        if name == room:
            continue
        private = parts[-1].startswith("_")
        if name in features and private:
            found.append(f"{name}: a feature, yet private")
        if not private and name not in features:
            found.append(f"{name}: public, yet no feature the wiring builds (make it _{parts[-1]})")
        if private:
            strangers = [m for m in importers_of(name, graph) if not m.startswith(f"{room}.")]
            if strangers:
                found.append(f"{name}: private to {room}, imported by {', '.join(strangers)}")
        for owner in owners.get(name, ()):
            if not owner.startswith(f"{room}."):
                found.append(f"{name}: a part of {owner}, in another room")
    return found


def single_room_views(
    modules: Mapping[str, Path],
    graph: Mapping[str, Iterable[str]],
    *,
    views: str = "bridge.engine.views",
    package: str = FEATURES_PACKAGE,
) -> list[str]:
    """``views/`` holds what more than one room reads: each view that modules of a single
    room of ``package`` reach (directly, or through other views), and nothing else does, as
    ``view: only ROOM reads it``."""
    depth = package.count(".") + 1
    found: list[str] = []
    for view in sorted(m for m in modules if m.startswith(f"{views}.")):
        readers: set[str] = set()
        seen, todo = {view}, [view]
        while todo:
            for importer in importers_of(todo.pop(), graph):
                if importer.startswith(f"{views}."):
                    if importer not in seen:
                        seen.add(importer)
                        todo.append(importer)
                elif importer.startswith(f"{package}."):
                    readers.add(".".join(importer.split(".")[: depth + 1]))
                else:
                    readers.add(importer)
        if len(readers) == 1 and next(iter(readers)).startswith(f"{package}."):
            found.append(f"{view}: only {next(iter(readers))} reads it")
    return found


def tangles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The groups of modules that all reach each other (each one a knot to untie)."""
    return [c for c in _strongly_connected(graph) if len(c) > 1]


def engine_violations(
    modules: Mapping[str, Path],
    *,
    engine: str = ENGINE,
    forbidden: Iterable[str] = ENGINE_FORBIDDEN,
    root: Path = PACKAGE_DIR.parent,
) -> list[str]:
    """``file:line imports X`` for every forbidden import in the engine package."""
    forbidden = tuple(forbidden)
    found: list[str] = []
    for name in sorted(modules):
        if name != engine and not name.startswith(f"{engine}."):
            continue
        for imp in imports_of(name, modules):
            # `import os.path` and `from trio.lowlevel import x` are `os`'s and `trio`'s too.
            if any(imp.target == f or imp.target.startswith(f"{f}.") for f in forbidden):
                found.append(f"{modules[name].relative_to(root)}:{imp.line} imports {imp.target}")
    return found


#: The one module that changes a turn's state (see its docstring): it alone assigns a
#: record's ``turn``, makes a ``Turn`` and sets the members that say where the turn is.
TURN_WRITER = "bridge.engine.core.turns"
#: The members of ``Turn`` that hold its state (its counts are the features' to keep).
TURN_STATE = frozenset(
    {
        "turn",
        "root_turn_id",
        "failure",
    }
)


def _assigned(node: ast.AST) -> list[ast.expr]:
    """What an assignment statement assigns to (nothing, for any other node)."""
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def engine_writes(
    modules: Mapping[str, Path],
    look: Callable[[str, ast.AST], list[tuple[int, str]]],
    *,
    engine: str,
    writer: str,
    root: Path,
) -> list[str]:
    """``file:line what`` for each write ``look`` finds in a module of ``engine`` but
    ``writer`` (``look`` is given the module's name and each node of its tree)."""
    found: list[str] = []
    for name in sorted(modules):
        if name == writer or not (name == engine or name.startswith(f"{engine}.")):
            continue
        path = modules[name]
        tree = ast.parse(path.read_text(), str(path))
        writes = [write for node in ast.walk(tree) for write in look(name, node)]
        found += [f"{path.relative_to(root)}:{line} {what}" for line, what in sorted(writes)]
    return found


#: The members of ``Turn`` that hold where it is (its ``TurnState`` and its ``Interrupt``),
#: names other records use too: a write counts when it is made through a turn
#: (``turn.state``, ``record.turn.interrupt``).
TURN_MOVES = frozenset({"state", "interrupt"})


def _through_a_turn(target: ast.Attribute) -> bool:
    owner = target.value
    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    return "turn" in name


def _turn_write(_module: str, node: ast.AST) -> list[tuple[int, str]]:
    writes = [
        (target.lineno, f"assigns .{target.attr}")
        for assigned in _assigned(node)
        for target in ast.walk(assigned)
        if isinstance(target, ast.Attribute)
        and (target.attr in TURN_STATE or (target.attr in TURN_MOVES and _through_a_turn(target)))
    ]
    if isinstance(node, ast.Call):
        callee = node.func
        called = callee.attr if isinstance(callee, ast.Attribute) else None
        called = getattr(callee, "id", called)
        if called == "Turn":
            writes.append((node.lineno, "makes a Turn"))
        if called == "ThreadRecord" and any(k.arg == "turn" for k in node.keywords):
            writes.append((node.lineno, "makes a record with a turn"))
    return writes


def turn_writes(
    modules: Mapping[str, Path],
    *,
    engine: str = ENGINE,
    writer: str = TURN_WRITER,
    root: Path = PACKAGE_DIR.parent,
) -> list[str]:
    """``file:line`` for every change to a turn's state outside ``writer``: an assignment to
    one of :data:`TURN_STATE` (``record.turn = ...``) or of :data:`TURN_MOVES` through a turn
    (``turn.state = ...``), a
    ``Turn(...)`` made, a record made with ``turn=``."""
    return engine_writes(modules, _turn_write, engine=engine, writer=writer, root=root)


#: The one module that moves Codex's side of the connection, and the one that makes it.
CODEX_SIDE_MOVER = f"{ENGINE}.core.connection"
CODEX_SIDE_OWNER = f"{ENGINE}.core.codex_link"


def _through_codex_side(chain: list[str]) -> int | None:
    """Where ``.codex.side`` is in an attribute chain read innermost first (``["state",
    "side", "codex", ...]``): the index of ``side``, or ``None``."""
    return next(
        (i for i in range(len(chain) - 1) if chain[i] == "side" and chain[i + 1] == "codex"),
        None,
    )


def codex_side_writes(
    modules: Mapping[str, Path],
    *,
    engine: str = ENGINE,
    mover: str = CODEX_SIDE_MOVER,
    owner: str = CODEX_SIDE_OWNER,
    root: Path = PACKAGE_DIR.parent,
) -> list[str]:
    """``file:line`` for every change to Codex's side of the connection (``hub.codex.side``)
    outside ``mover``: a ``.codex.side.move(...)``, an assignment through ``.codex.side``
    (or to it), a ``CodexSide(...)`` made anywhere but ``owner``."""

    def look(module: str, node: ast.AST) -> list[tuple[int, str]]:
        writes: list[tuple[int, str]] = []
        for target in _assigned(node):
            chain = [n.attr for n in ast.walk(target) if isinstance(n, ast.Attribute)]
            if _through_codex_side(chain) is not None:
                writes.append((target.lineno, "assigns through .codex.side"))
        if isinstance(node, ast.Call):
            callee = node.func
            if (
                isinstance(callee, ast.Attribute)
                and callee.attr == "move"
                and _through_codex_side(
                    [n.attr for n in ast.walk(callee.value) if isinstance(n, ast.Attribute)]
                )
                == 0
            ):
                writes.append((node.lineno, "moves .codex.side"))
            if getattr(callee, "id", None) == "CodexSide" and module != owner:
                writes.append((node.lineno, "makes a CodexSide"))
        return writes

    return engine_writes(modules, look, engine=engine, writer=mover, root=root)


#: Codex methods whose answer always changes the record asking: asked with ``hub.codex.ask``,
#: their entry typed, never with ``codex.request`` and a closure.
RECORD_METHODS = frozenset({"turn/start", "turn/interrupt", "turn/steer"})
#: ``CodexLink.ask``'s ``answered`` and ``failed``, by position (after record, entry, method,
#: params, result type).
_ASK_HANDLERS = (5, 6)


def closure_asks(
    modules: Mapping[str, Path],
    *,
    features: str = FEATURES_PACKAGE,
    root: Path = PACKAGE_DIR.parent,
) -> list[str]:
    """``file:line`` for each feature that asks Codex for a record with a closure: a
    :data:`RECORD_METHODS` method through ``codex.request``, or an ``ask`` whose
    ``answered`` or ``failed`` is a lambda or a function nested in another."""
    found: list[str] = []
    for name in sorted(modules):
        if not name.startswith(f"{features}."):
            continue
        path = modules[name]
        tree = ast.parse(path.read_text(), str(path))
        asks: set[tuple[int, str]] = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "request"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "codex"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in RECORD_METHODS
            ):
                asks.add((node.lineno, f"asks {node.args[0].value} with codex.request"))
        for outer in ast.walk(tree):
            if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            inside = list(ast.walk(outer))
            nested = {
                inner.name
                for inner in inside
                if inner is not outer and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            for node in inside:
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "ask"
                ):
                    continue
                for position in _ASK_HANDLERS:
                    handler = node.args[position] if len(node.args) > position else None
                    if isinstance(handler, ast.Lambda) or (
                        isinstance(handler, ast.Name) and handler.id in nested
                    ):
                        asks.add((node.lineno, "asks with a closure"))
        found += [f"{path.relative_to(root)}:{line} {what}" for line, what in sorted(asks)]
    return found


# -- the package ------------------------------------------------------------------------


MODULES = find_modules(PACKAGE_DIR)
GRAPH = import_graph(MODULES)
FEATURE_MODULES, PART_OWNERS = feature_map(MODULES, GRAPH)


def fail_listing(heading: str, found: Sequence[str], sep: str = "\n") -> None:
    """Fails the test, without a traceback, with ``heading`` and then ``found`` one per
    line; passes when nothing was found."""
    if found:
        pytest.fail(heading + sep.join(found), pytrace=False)


def test_no_import_cycles() -> None:
    cycles = find_cycles(GRAPH)
    if cycles:
        knots = "".join(f"\n  {len(knot)} modules: {', '.join(knot)}" for knot in tangles(GRAPH))
        pytest.fail(
            "import cycles in bridge/ (function-level and TYPE_CHECKING imports count):\n"
            f"{cycle_report(cycles)}\nmodules that all import each other:{knots}",
            pytrace=False,
        )


def test_no_import_loop_between_folders() -> None:
    # A module-level cycle is caught above; this one is coarser: shell/ importing daemon/
    # while daemon/ imports shell/ leaves no layer that can be read or tested first.
    cycles = find_cycles(folder_graph(GRAPH, "bridge"))
    if cycles:
        pytest.fail(
            "folders of bridge/ that import each other (one must build on the other; what "
            f"both need belongs in the lower one):\n{cycle_report(cycles)}",
            pytrace=False,
        )


def room_violations(
    modules: Mapping[str, Path],
    graph: Mapping[str, Iterable[str]],
    package: str,
    allowed: Mapping[str, set[str]],
) -> list[str]:
    """``room -> room`` for each import between ``package``'s folders (its rooms) that
    ``allowed`` does not permit, and each room ``allowed`` has no rule for. A module
    beside the rooms (the wiring) may import any of them."""
    found: list[str] = []
    for node, targets in sorted(folder_graph(graph, package).items()):
        if not _is_package(modules[node]):
            continue
        room = node[len(package) + 1 :]
        if room not in allowed:
            found.append(f"{room}: a room with no rule")
            continue
        for target in sorted(targets):
            into = target[len(package) + 1 :]
            if into not in allowed[room]:
                found.append(f"{room} -> {into}")
    return found


def test_the_engine_rooms_import_one_way() -> None:
    # Derived from the folders: a new room fails here until it is given its place.
    rooms = sorted(
        name[len(ENGINE) + 1 :]
        for name, path in MODULES.items()
        if name.count(".") == 2 and name.startswith(f"{ENGINE}.") and _is_package(path)
    )
    assert sorted(ROOM_IMPORTS) == rooms, f"rooms under bridge/engine/: {rooms}"
    fail_listing(
        "engine rooms importing against the grain (core <- views <- features, faces; "
        "the wiring module above them all):\n",
        room_violations(MODULES, GRAPH, ENGINE, ROOM_IMPORTS),
    )


def test_the_engine_does_no_io() -> None:
    fail_listing(
        "the engine must stay pure (files, clocks, processes and sockets belong to "
        "bridge.shell):\n",
        engine_violations(MODULES),
    )


def test_only_the_turns_module_changes_a_turns_state() -> None:
    fail_listing(
        f"a turn's state changes in {TURN_WRITER} alone (tell it the event):\n",
        turn_writes(MODULES),
    )


def test_only_the_connection_moves_codexs_side() -> None:
    fail_listing(
        f"Codex's side of the connection moves in {CODEX_SIDE_MOVER} alone:\n",
        codex_side_writes(MODULES),
    )


#: Who may write each field of the hub, besides the hub itself (a field not listed: the hub
#: alone). ``setup`` is frozen; the Codex side (``hub.codex``) and the client side
#: (``hub.client``) are objects of their own, whose fields are listed as ``codex.X`` and
#: ``client.X``; ``codex.side`` moves through the connection (above).
HUB_WRITERS: dict[str, frozenset[str]] = {
    "handshake": frozenset({f"{ENGINE}.core.connection"}),
    "codex.router": frozenset({f"{ENGINE}.core.codex_routing"}),
    "profile": frozenset({f"{ENGINE}.features.settings.settings"}),
    "machines": frozenset({f"{ENGINE}.features.settings.machines"}),
    "codex.unknown": frozenset({f"{ENGINE}.features.sessions.admin"}),
}
#: The hub's two sides (objects of their own, with their own methods).
SIDES = frozenset({"client", "codex"})
#: Calls that change the collection they are called on.
MUTATORS = frozenset(
    {
        "add",
        "append",
        "clear",
        "discard",
        "extend",
        "insert",
        "pop",
        "remove",
        "setdefault",
        "update",
    }
)


def _chain(node: ast.expr) -> list[str]:
    """The names an expression goes through, outermost first (``self.hub.X[k].y``: ``self``,
    ``hub``, ``X``, ``y``)."""
    chain: list[str] = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            chain.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        chain.append(node.id)
    chain.reverse()
    return chain


def _written(node: ast.AST, mutators: frozenset[str]) -> list[tuple[int, ast.expr, bool]]:
    """What a node writes through, with its line: each target it assigns or deletes, and the
    receiver of a changing call (marked ``True``: a call)."""
    found = [(t.lineno, t, False) for t in _assigned(node)]
    if isinstance(node, ast.Delete):
        found += [(t.lineno, t, False) for t in node.targets]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in mutators
    ):
        found.append((node.lineno, node.func.value, True))
    return found


def _hub_field(node: ast.expr) -> str | None:
    """The hub field an expression reaches (``hub.X``, ``self.hub.X.y``, ``hub.X[k]``; a
    side's own field as ``codex.X`` or ``client.X``); ``None`` when it reaches none."""
    chain = _chain(node)
    for at, name in enumerate(chain[:-1]):
        if name == "hub":
            field = chain[at + 1]
            if field in SIDES and len(chain) > at + 2:
                field = f"{field}.{chain[at + 2]}"
            return field
    return None


def hub_writes(
    modules: Mapping[str, Path],
    *,
    engine: str = ENGINE,
    hub: str = f"{ENGINE}.core.hub",
    writers: Mapping[str, frozenset[str]] = HUB_WRITERS,
    root: Path = PACKAGE_DIR.parent,
) -> list[str]:
    """``file:line`` for each write to a hub field (an assignment through ``hub.X``, or a
    mutating call on it) by a module that is not its writer (:data:`HUB_WRITERS`)."""

    def look(module: str, node: ast.AST) -> list[tuple[int, str]]:
        found = []
        for line, target, called in _written(node, MUTATORS):
            field = _hub_field(target)
            # ``hub.client.update(...)``: a side's own method, not a change to a field.
            if field is None or (called and field in SIDES):
                continue
            if module not in writers.get(field, frozenset()):
                found.append((line, f"writes hub.{field}"))
        return found

    return engine_writes(modules, look, engine=engine, writer=hub, root=root)


def test_each_hub_field_is_written_by_its_owner_alone() -> None:
    fail_listing(
        "a hub field written by a module that does not own it (tests/test_architecture.py's "
        "HUB_WRITERS):\n",
        hub_writes(MODULES),
    )


#: The parts of a thread record, each its writer's alone (besides core/record_parts.py,
#: where each part's own methods live, through which the others tell it what happened):
#: ``record.stream``, ``record.shown``, ``record.mcp``, ``record.tools``, ``record.life``,
#: ``record.placing``, ``record.work``.
RECORD_PART_WRITERS: dict[str, str] = {
    "stream": f"{ENGINE}.features.prompts.streaming",
    "shown": f"{ENGINE}.faces.v2",
    "mcp": f"{ENGINE}.features.sessions.mcp_servers",
    "tools": f"{ENGINE}.features.tools.tools",
    "life": f"{ENGINE}.features.sessions.lifecycle",
    "placing": f"{ENGINE}.features.subagents._placement",
    "work": f"{ENGINE}.features.subagents._work",
}
#: The methods of a record part that change it.
PART_MUTATORS = MUTATORS | {"turn_ended"}


def _record_part(node: ast.expr, parts: Iterable[str]) -> str | None:
    """The record part an expression reaches (``record.stream``, ``r.shown.asking``,
    ``record.mcp.failed[k]``); ``None`` when it reaches none."""
    chain = _chain(node)
    # An object's own attribute of a part's name (``self.tools = Tools(hub)``) is no part.
    if chain[:1] == ["self"] and len(chain) == 2:
        return None
    return next((name for name in chain[1:] if name in parts), None)


def record_part_writes(
    modules: Mapping[str, Path],
    *,
    engine: str = ENGINE,
    parts_module: str = f"{ENGINE}.core.record_parts",
    writers: Mapping[str, str] = RECORD_PART_WRITERS,
    root: Path = PACKAGE_DIR.parent,
) -> list[str]:
    """``file:line`` for each write to a record part (an assignment through it, or a
    changing call on it) by a module that is not the part's writer."""

    def look(module: str, node: ast.AST) -> list[tuple[int, str]]:
        found = []
        for line, target, _called in _written(node, PART_MUTATORS):
            part = _record_part(target, writers) if not isinstance(target, ast.Name) else None
            if part is not None and module != writers[part]:
                found.append((line, f"writes record.{part}"))
        return found

    return engine_writes(modules, look, engine=engine, writer=parts_module, root=root)


def test_each_record_part_is_written_by_its_owner_alone() -> None:
    fail_listing(
        "a record part written by a module that does not own it (tests/test_architecture.py's "
        "RECORD_PART_WRITERS):\n",
        record_part_writes(MODULES),
    )


def test_the_record_part_check_sees_each_kind_of_write(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/core/record_parts.py": "class Stream:\n    def clear(self):\n        self.a = 1\n",
            "fake/features/streaming.py": "def f(record):\n    record.stream.usage = 1\n",
            "fake/features/f.py": (
                "def f(record, r):\n"
                "    record.stream.usage = None\n"
                "    r.shown.asking.add(1)\n"
                "    record.mcp.failed['x'] = 'why'\n"
                "    del record.mcp.failed['x']\n"
                "    record.stream.turn_ended()\n"
                "    record.stream = None\n"
                "    record.shown.asking\n"
                "    record.settings.mode = 'x'\n"
                "    self.tools = None\n"
            ),
        },
    )
    writers = {
        "stream": "fake.features.streaming",
        "shown": "fake.faces.v2",
        "mcp": "fake.features.mcp",
    }
    found = record_part_writes(
        find_modules(package),
        engine="fake",
        parts_module="fake.core.record_parts",
        writers=writers,
        root=tmp_path,
    )
    assert found == [
        "fake/features/f.py:2 writes record.stream",
        "fake/features/f.py:3 writes record.shown",
        "fake/features/f.py:4 writes record.mcp",
        "fake/features/f.py:5 writes record.mcp",
        "fake/features/f.py:6 writes record.stream",
        "fake/features/f.py:7 writes record.stream",
    ]


def test_the_hub_check_sees_each_kind_of_write(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/core/hub.py": "class Hub:\n    def f(self):\n        self.face = 1\n",
            "fake/core/connection.py": "def f(hub):\n    hub.handshake.air = None\n",
            "fake/features/f.py": (
                "def f(self, hub):\n"
                "    self.hub.client.face = None\n"
                "    hub.handshake.air = None\n"
                "    hub.codex.unknown.add('m')\n"
                "    hub.machines['x'] = 1\n"
                "    hub.threads.session('x')\n"
                "    self.hub.threads.get('x').turn\n"
                "    hub.client.update('s', None)\n"
                "    hub.client.open_requests.add(1)\n"
            ),
        },
    )
    writers = {"handshake": frozenset({"fake.core.connection"})}
    found = hub_writes(
        find_modules(package), engine="fake", hub="fake.core.hub", writers=writers, root=tmp_path
    )
    assert found == [
        "fake/features/f.py:2 writes hub.client.face",
        "fake/features/f.py:3 writes hub.handshake",
        "fake/features/f.py:4 writes hub.codex.unknown",
        "fake/features/f.py:5 writes hub.machines",
        "fake/features/f.py:9 writes hub.client.open_requests",
    ]


def test_the_codex_side_check_sees_each_kind_of_write(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/core/connection.py": "def lost(hub):\n    hub.codex.side.move(LOST, 'x')\n",
            "fake/core/codex_link.py": "class CodexLink:\n    def __init__(self):\n        self.side = CodexSide()\n",
            "fake/features/f.py": (
                "def f(hub, CodexSide):\n"
                "    hub.codex.side.move(READY)\n"
                "    hub.codex.side.state = READY\n"
                "    hub.codex.side = CodexSide()\n"
                "    hub.codex.side.reason == 'x'\n"
            ),
        },
    )
    found = codex_side_writes(
        find_modules(package),
        engine="fake",
        mover="fake.core.connection",
        owner="fake.core.codex_link",
        root=tmp_path,
    )
    assert found == [
        "fake/features/f.py:2 moves .codex.side",
        "fake/features/f.py:3 assigns through .codex.side",
        "fake/features/f.py:4 assigns through .codex.side",
        "fake/features/f.py:4 makes a CodexSide",
    ]


def test_a_feature_asks_codex_for_a_record_without_closures() -> None:
    fail_listing(
        "a Codex request that changes a record is a typed entry on it, answered to "
        "the feature's methods (hub.codex.ask; see bridge/engine/core/codex_link.py):\n",
        closure_asks(MODULES),
    )


def test_the_closure_check_sees_each_way_of_asking_with_one(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/features/f.py": (
                "class F:\n"
                "    def start(self, hub, record, entry):\n"
                "        def done(result):\n"
                "            pass\n"
                "        hub.codex.request('turn/start', {}, None, done, done)\n"
                "        hub.codex.ask(record, entry, 'm', {}, None, done, self.failed)\n"
                "        hub.codex.ask(record, entry, 'm', {}, None, self.ok, lambda r, e, x: None)\n"
                "        hub.codex.ask(record, entry, 'turn/steer', {}, None, self.ok, self.failed)\n"
                "        hub.codex.request('thread/list', {}, None, done, done)\n"
                "    def other(self, hub, record, entry, failed):\n"
                "        hub.codex.ask(record, entry, 'm', {}, None, self.ok, failed)\n"
            ),
        },
    )
    found = closure_asks(find_modules(package), features="fake.features", root=tmp_path)
    assert found == [
        "fake/features/f.py:5 asks turn/start with codex.request",
        "fake/features/f.py:6 asks with a closure",
        "fake/features/f.py:7 asks with a closure",
    ]


def test_the_turn_check_sees_each_kind_of_write(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/core/turns.py": "def begin(record):\n    record.turn = Turn()\n",
            "fake/features/f.py": (
                "def f(record, turn, ThreadRecord, Turn):\n"
                "    record.turn = None\n"
                "    turn.state = TurnState.CANCELLING\n"
                "    a.turn, b = None, 1\n"
                "    ThreadRecord('t', turn=Turn(id='x'))\n"
                "    record.turn.id == 'x'\n"
                "    turn.interrupt = None\n"
                "    link.machine.state = 'idle'\n"
            ),
        },
    )
    found = turn_writes(
        find_modules(package), engine="fake", writer="fake.core.turns", root=tmp_path
    )
    assert found == [
        "fake/features/f.py:2 assigns .turn",
        "fake/features/f.py:3 assigns .state",
        "fake/features/f.py:4 assigns .turn",
        "fake/features/f.py:5 makes a Turn",
        "fake/features/f.py:5 makes a record with a turn",
        "fake/features/f.py:7 assigns .interrupt",
    ]


def test_the_features_are_the_classes_the_wiring_builds() -> None:
    # The feature list is derived (feature_map): what the wiring imports from the features
    # package on the hub is what it builds, and it builds nothing else from there.
    built = built_classes(WIRING_MODULE, MODULES)
    from_features = {m for m in built.values() if m.startswith(f"{FEATURES_PACKAGE}.")}
    assert "bridge.engine.features.prompts.prompts" in FEATURE_MODULES
    assert sorted(from_features) == FEATURE_MODULES, (
        "the wiring builds a class of each feature it imports, and only those: "
        f"built from {sorted(from_features)}, features {FEATURE_MODULES}"
    )


@pytest.mark.parametrize("feature", FEATURE_MODULES)
def test_a_feature_is_imported_only_by_the_wiring_module(feature: str) -> None:
    importers = importers_of(feature, GRAPH)
    by = ", ".join(importers) or "nothing"
    # Features know nothing of each other; only the wiring module puts them together (its
    # routing tables name their handlers).
    if WIRING_MODULE not in importers or not set(importers) <= {WIRING_MODULE, ROUTES_MODULE}:
        pytest.fail(
            f"{feature} must be imported by {WIRING_MODULE} (and its tables, {ROUTES_MODULE})"
            f" alone; imported by: {by}",
            pytrace=False,
        )


def test_a_view_one_room_reads_lives_in_that_room() -> None:
    fail_listing(
        "views/ holds what one room alone reads:\n  ", single_room_views(MODULES, GRAPH), "\n  "
    )


def test_features_live_in_rooms_with_their_parts_private() -> None:
    fail_listing("features/ out of shape:\n  ", room_violations_in_features(MODULES, GRAPH), "\n  ")


@pytest.mark.parametrize("part", sorted(PART_OWNERS))
def test_a_part_of_a_feature_is_imported_by_that_feature_alone(part: str) -> None:
    # A module on the hub the wiring does not import is a part of one feature (steering
    # of prompts, pending of approvals): only that feature and its other parts import it.
    owners = PART_OWNERS[part]
    importers = importers_of(part, GRAPH)
    if len(owners) != 1:
        pytest.fail(
            f"{part} is on the hub but no feature's part: reached by {sorted(owners) or 'none'}; "
            f"imported by {', '.join(importers) or 'nothing'}",
            pytrace=False,
        )
    (owner,) = owners
    family = {owner} | {p for p, o in PART_OWNERS.items() if o == owners}
    strangers = [m for m in importers if m not in family]
    if strangers:
        pytest.fail(f"{part}, a part of {owner}, is imported by {strangers}", pytrace=False)


# -- the checker, on packages made up for the purpose -----------------------------------


def _make_package(root: Path, files: Mapping[str, str]) -> Path:
    """The package ``fake`` under ``root``, of ``files`` (an ``__init__`` not given empty)."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in [root / "fake", *(root / "fake").rglob("*/")]:
        (folder / "__init__.py").touch()
    return root / "fake"


def test_the_checker_finds_cycles_through_type_checking_and_subpackages(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/core/__init__.py": "from .engine import Engine\n",
            "fake/core/engine.py": "class Engine:\n    pass\n",
            "fake/core/feature.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ..core import Engine\n"  # the package's __init__, a module too
            ),
            "fake/core/engine2.py": "import fake.core.feature\n",
            "fake/util.py": "from fake.core import feature\n",
        },
    )
    graph = import_graph(find_modules(package))
    assert graph["fake.core.feature"] == {"fake.core"}
    assert graph["fake.util"] == {"fake.core.feature"}
    assert find_cycles(graph) == []
    # Close it: the package's __init__ imports a module that imports the package back.
    (package / "core" / "__init__.py").write_text(
        "from .engine import Engine\nfrom . import feature\n"
    )
    cycles = find_cycles(import_graph(find_modules(package)))
    assert cycle_report(cycles) == "fake.core -> fake.core.feature -> fake.core"


def test_the_checker_passes_a_package_without_cycles(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/__init__.py": "__version__ = '1'\nfrom . import __version__ as v\n",
            "fake/a.py": "from . import b, c\nimport fake\n",
            "fake/b.py": "def f():\n    from .c import g\n    return g\n",
            "fake/c.py": "import os.path\nimport fake\ndef g():\n    pass\n",
        },
    )
    graph = import_graph(find_modules(package))
    assert graph == {
        "fake": set(),
        "fake.a": {"fake", "fake.b", "fake.c"},
        "fake.b": {"fake.c"},
        "fake.c": {"fake"},
    }
    assert find_cycles(graph) == []


@pytest.mark.parametrize(
    ("files", "report"),
    [
        pytest.param(
            {
                "fake/a.py": "from .b import thing\n",
                "fake/b.py": "def thing():\n    from . import a\n    return a\n",
                "fake/c.py": "from . import a\n",  # reaches the cycle but is not on it
            },
            "fake.a -> fake.b -> fake.a",
            id="through-a-function-level-import",
        ),
        pytest.param(
            {
                "fake/a.py": "from . import b\n",
                "fake/b.py": "from . import c\n",
                "fake/c.py": "from . import a\nfrom . import d\n",
                "fake/d.py": "def f():\n    from . import b\n",
            },
            "fake.a -> fake.b -> fake.c -> fake.a\nfake.b -> fake.c -> fake.d -> fake.b",
            id="a-long-cycle-and-its-branches",
        ),
    ],
)
def test_the_checker_finds_cycles(tmp_path: Path, files: dict[str, str], report: str) -> None:
    package = _make_package(tmp_path, files)
    assert cycle_report(find_cycles(import_graph(find_modules(package)))) == report


def test_the_checker_finds_a_loop_between_folders(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/cli.py": "from .daemon import run\nfrom .shell import serve\n",
            "fake/shell/__init__.py": "",
            "fake/shell/serve.py": "from ..shell.streams import Stream\n",
            "fake/shell/streams.py": "class Stream: ...\n",
            "fake/daemon/__init__.py": "",
            "fake/daemon/run.py": "from ..shell.streams import Stream\nimport fake\n",
        },
    )
    graph = import_graph(find_modules(package))
    assert folder_graph(graph, "fake") == {
        "fake.cli": {"fake.daemon", "fake.shell"},
        "fake.daemon": {"fake.shell"},  # the package's own __init__ is no folder
        "fake.shell": set(),
    }
    assert find_cycles(graph) == []
    assert find_cycles(folder_graph(graph, "fake")) == []
    # No module cycle, yet the folders loop: serve.py -> daemon.run, run.py -> shell.streams.
    (package / "shell" / "serve.py").write_text("def f():\n    from ..daemon import run\n")
    graph = import_graph(find_modules(package))
    assert find_cycles(graph) == []
    assert cycle_report(find_cycles(folder_graph(graph, "fake"))) == (
        "fake.daemon -> fake.shell -> fake.daemon"
    )


def test_the_checker_finds_a_room_importing_against_the_grain(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/engine/wiring.py": "from .core import hub\nfrom .features import prompts\n",
            "fake/engine/core/hub.py": "class Hub: ...\n",
            "fake/engine/views/look.py": "from ..core.hub import Hub\n",
            "fake/engine/features/prompts.py": "from ..views import look\n",
        },
    )
    allowed = {"core": set(), "views": {"core"}, "features": {"core", "views"}}
    modules = find_modules(package)
    assert room_violations(modules, import_graph(modules), "fake.engine", allowed) == []
    (package / "engine" / "core" / "hub.py").write_text(
        "def f():\n    from ..features import prompts\n"
    )
    (package / "engine" / "extra").mkdir()
    (package / "engine" / "extra" / "__init__.py").write_text("from ..core import hub\n")
    modules = find_modules(package)
    assert room_violations(modules, import_graph(modules), "fake.engine", allowed) == [
        "core -> features",
        "extra: a room with no rule",
    ]


def test_the_feature_map_tells_features_from_parts(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/features/__init__.py": "",
            "fake/features/views.py": "def look(): ...\n",
            "fake/features/prompts.py": (
                "from .steering import Steering\nfrom .views import look\n"
                "class Prompts:\n    def __init__(self, hub, *, settings): ...\n"
            ),
            "fake/features/steering.py": "class Steering:\n    def __init__(self, hub): ...\n",
            "fake/features/recovery.py": (
                "from dataclasses import dataclass\n"
                "@dataclass\nclass Recovery:\n    hub: object\n    report: object\n"
            ),
            "fake/features/orphan.py": "class Orphan:\n    def __init__(self, hub): ...\n",
            "fake/wiring.py": (
                "from .features.prompts import Prompts\nfrom .features.recovery import Recovery\n"
                "from .features import views\n"
                "class Engine:\n    def __init__(self, hub):\n"
                "        self.prompts = Prompts(hub, settings=None)\n"
                "        self.recovery = Recovery(hub, report=None)\n"
            ),
        },
    )
    modules = find_modules(package)
    graph = import_graph(modules)
    features, owners = feature_map(modules, graph, package="fake.features", wiring="fake.wiring")
    assert features == ["fake.features.prompts", "fake.features.recovery"]
    assert owners == {"fake.features.orphan": set(), "fake.features.steering": {features[0]}}
    assert built_classes("fake.wiring", modules) == {
        "Prompts": "fake.features.prompts",
        "Recovery": "fake.features.recovery",
    }
    # A part reached from two features belongs to neither.
    (package / "features" / "recovery.py").write_text(
        "from .steering import Steering\nclass Recovery:\n    def __init__(self, hub): ...\n"
    )
    graph = import_graph(find_modules(package))
    _, owners = feature_map(modules, graph, package="fake.features", wiring="fake.wiring")
    assert owners["fake.features.steering"] == set(features)


def test_the_room_check_sees_each_way_out_of_shape(tmp_path: Path) -> None:
    hub_class = "    def __init__(self, hub): ...\n"
    package = _make_package(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/features/__init__.py": "",
            "fake/features/loose.py": "",
            "fake/features/prompts/__init__.py": "",
            "fake/features/prompts/prompts.py": (
                f"from ._steering import Steering\nfrom ._input import blocks\n"
                f"class Prompts:\n{hub_class}"
            ),
            "fake/features/prompts/_steering.py": f"class Steering:\n{hub_class}",
            "fake/features/prompts/_input.py": "def blocks(): ...\n",
            "fake/features/prompts/_wired.py": f"class Wired:\n{hub_class}",
            "fake/features/prompts/helper.py": "def help(): ...\n",
            "fake/features/other/__init__.py": "",
            "fake/features/other/other.py": (
                f"from ..prompts._input import blocks\nclass Other:\n{hub_class}"
            ),
            "fake/wiring.py": (
                "from .features.prompts.prompts import Prompts\n"
                "from .features.prompts._wired import Wired\n"
                "from .features.other.other import Other\n"
            ),
        },
    )
    modules = find_modules(package)
    graph = import_graph(modules)
    found = room_violations_in_features(
        modules, graph, package="fake.features", wiring="fake.wiring"
    )
    assert found == [
        "fake.features.loose: outside a room",
        "fake.features.prompts._input: private to fake.features.prompts, "
        "imported by fake.features.other.other",
        "fake.features.prompts._wired: a feature, yet private",
        "fake.features.prompts._wired: private to fake.features.prompts, imported by fake.wiring",
        "fake.features.prompts.helper: public, yet no feature the wiring builds (make it _helper)",
    ]


def test_the_view_check_sees_a_view_one_room_reads(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/views/__init__.py": "",
            "fake/views/shared.py": "from . import inner\n",
            "fake/views/inner.py": "",
            "fake/views/lonely.py": "",
            "fake/features/__init__.py": "",
            "fake/features/a/__init__.py": "",
            "fake/features/a/a.py": "from ...views import shared, lonely\n",
            "fake/features/b/__init__.py": "",
            "fake/features/b/b.py": "from ...views import shared\n",
        },
    )
    modules = find_modules(package)
    found = single_room_views(
        modules, import_graph(modules), views="fake.views", package="fake.features"
    )
    # inner is read through shared, by both rooms; lonely by one.
    assert found == ["fake.views.lonely: only fake.features.a reads it"]


def test_the_purity_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    package = _make_package(
        tmp_path,
        {
            "fake/engine/a.py": (
                "import os.path\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from trio import Nursery\n"
                "def f():\n"
                "    from time import monotonic\n"
                "    from ..shell import run\n"
            ),
            "fake/shell/run.py": "import trio\n",  # the shell may
        },
    )
    forbidden = [name.replace("bridge.", "fake.", 1) for name in ENGINE_FORBIDDEN]
    violations = engine_violations(
        find_modules(package), engine="fake.engine", forbidden=forbidden, root=tmp_path
    )
    assert violations == [
        "fake/engine/a.py:1 imports os.path",
        "fake/engine/a.py:4 imports trio",
        "fake/engine/a.py:6 imports time",
        "fake/engine/a.py:7 imports fake.shell.run",
    ]


def test_the_checks_pass_an_engine_shaped_as_intended(tmp_path: Path) -> None:
    # The target shape: features see shared types only, the wiring module sees the features.
    package = _make_package(
        tmp_path,
        {
            "fake/engine/__init__.py": "from .wiring import Engine\n",
            "fake/engine/sessions.py": (
                "import logging\nfrom dataclasses import dataclass\n"
                "@dataclass\nclass Session:\n    def __init__(self): ...\n"
            ),
            "fake/engine/prompts.py": (
                "from .sessions import Session\n"
                "class Prompts:\n    def __init__(self, session: Session): ...\n"
            ),
            "fake/engine/tools.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from .sessions import Session\n"
                "class Tools:\n    def __init__(self): ...\n"
            ),
            "fake/engine/wiring.py": (
                "from .prompts import Prompts\nfrom .tools import Tools\nclass Engine: ...\n"
            ),
            "fake/shell/run.py": "import trio\nfrom ..engine import Engine\n",
        },
    )
    modules = find_modules(package)
    graph = import_graph(modules)
    assert find_cycles(graph) == []
    assert engine_violations(modules, engine="fake.engine", root=tmp_path) == []
    for feature in ("fake.engine.prompts", "fake.engine.tools"):
        assert importers_of(feature, graph) == ["fake.engine.wiring"]
    # A feature reaching into another, even lazily, is caught.
    (package / "engine" / "prompts.py").write_text("def f():\n    from . import tools\n")
    graph = import_graph(find_modules(package))
    assert importers_of("fake.engine.tools", graph) == ["fake.engine.prompts", "fake.engine.wiring"]

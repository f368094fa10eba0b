"""The package imports downwards: no two modules import each other at module level (TYPE_CHECKING blocks included;
imports inside functions are lazy by design and left out, and so are package __init__ re-export hubs). Issue 32
found tokenizer/cache.py and tokenizer/core.py importing each other and an "old home" module kept for one name."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "koelectra_kit"


def _modules() -> dict[str, Path]:
    mods = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


def _module_level_imports(tree: ast.Module):
    """Import nodes outside function and class bodies (if/try blocks at module level included)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps = set()
        for node in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = pkg
                for _ in range(max(node.level - 1, 0)):
                    base = base.rsplit(".", 1)[0]
                target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                targets = [target] + [f"{target}.{a.name}" for a in node.names]
            else:
                targets = [a.name for a in node.names]
            deps.update(t for t in targets if t in mods and t != name and mods[t].name != "__init__.py")
        graph[name] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the path, 2 = done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep, path + [dep])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_no_module_imports_one_that_imports_it_back():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_the_old_two_way_import():
    """The check itself: the tokenizer's old cache <-> core pair is found."""
    graph = {"k.tokenizer.core": {"k.tokenizer.cache"}, "k.tokenizer.cache": {"k.tokenizer.core"}, "k.x": set()}
    assert _cycle(graph) == ["k.tokenizer.cache", "k.tokenizer.core", "k.tokenizer.cache"]


def test_no_old_home_modules():
    assert not (PACKAGE / "utils.py").exists()

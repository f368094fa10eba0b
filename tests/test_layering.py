"""The package imports downwards, checked two ways.

Modules: no two modules import each other at module level (TYPE_CHECKING blocks included; imports inside
functions are lazy by design and left out, and so are package __init__ re-export hubs). Issue 32 found
tokenizer/cache.py and tokenizer/core.py importing each other and an "old home" module kept for one name.

Parts (issue 40): the top of koelectra_kit/ is a few cross-cutting modules and one subpackage per concern. Between
these parts every import counts, those inside functions too (a lazy import still ties the two together), and
each part imports only parts in lower layers of ``LAYERS``. Issue 40 found classifier.py and ensemble.py loading
each other, the ensemble reaching up into label/ and finetune/, and hub.py <-> tokenizer/.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "koelectra_kit"

# Lowest first. A part imports only parts in a lower layer; parts in one layer do not import each other.
LAYERS = [
    ["errors"],  # InputError / ConfigError
    ["runtime"],  # seed, device, precision, the logger
    ["config"],  # typed configs from YAML + key=value
    ["io"],  # files and datasets in, output folders, figures
    ["hub"],  # the Hugging Face hub and transformers glue
    ["tokenizer"],  # normalize -> Kiwi pre-split -> WordPiece
    ["electra"],  # the pretraining model
    ["classify"],  # the classifier kinds (encoder, TF-IDF, ensemble) and what scores them
    ["pretrain", "finetune"],  # the training stages
    ["distill"],  # a small student from teachers: uses both stages
    ["label"],  # files labelled by a classifier
    ["suggest"],  # which rows to label next: scores with the labeller's readers
    ["app"],  # the web app over all of the above
    ["cli"],  # one thin command per stage
    ["__main__"],
]
MAX_TOP_MODULES = 4  # besides __init__ and __main__: only what every part uses


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


def _all_imports(tree: ast.Module):
    """Every import node, inside functions and classes too."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def _targets(node, name: str, path: Path) -> list[str]:
    """Absolute names ``node`` imports in module ``name`` (a ``from`` import: the module and module.NAME each)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    if isinstance(node, ast.ImportFrom):
        base = pkg
        for _ in range(max(node.level - 1, 0)):
            base = base.rsplit(".", 1)[0]
        target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
        return [target] + [f"{target}.{a.name}" for a in node.names]
    return [a.name for a in node.names]


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            deps.update(t for t in _targets(node, name, path)
                        if t in mods and t != name and mods[t].name != "__init__.py")
        graph[name] = deps
    return graph


def _part(module: str) -> str | None:
    """The top-level part a module belongs to: ``koelectra_kit.classify.tfidf`` -> ``classify``; None for the
    package itself (its __init__ runs before any of its modules, so importing it ties nothing together)."""
    bits = module.split(".")
    return bits[1] if len(bits) > 1 and bits[0] == PACKAGE.name else None


def _part_graph() -> dict[str, set[str]]:
    """Part -> the other parts its modules import, counting imports inside functions."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        part = _part(name)
        if part is None:
            continue
        deps = graph.setdefault(part, set())
        for node in _all_imports(ast.parse(path.read_text(encoding="utf-8"))):
            for t in _targets(node, name, path):
                other = _part(t)
                if other and other != part and (t in mods or any(m.startswith(t + ".") for m in mods)):
                    deps.add(other)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the path, 2 = done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
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


def _upward(graph: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """``A -> B`` for every import of a part in the same or a higher layer."""
    level = {part: i for i, layer in enumerate(layers) for part in layer}
    return [f"{a} -> {b}" for a in sorted(graph) for b in sorted(graph[a]) if level[b] >= level[a]]


def test_no_module_imports_one_that_imports_it_back():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_the_old_two_way_import():
    """The check itself: the tokenizer's old cache <-> core pair is found."""
    graph = {"k.tokenizer.core": {"k.tokenizer.cache"}, "k.tokenizer.cache": {"k.tokenizer.core"}, "k.x": set()}
    assert _cycle(graph) == ["k.tokenizer.cache", "k.tokenizer.core", "k.tokenizer.cache"]


def test_every_part_has_a_layer():
    placed = [part for layer in LAYERS for part in layer]
    assert len(placed) == len(set(placed))
    missing = sorted(set(_part_graph()) - set(placed))
    assert not missing, f"give {missing} a layer in LAYERS (tests/test_layering.py) and docs/ARCHITECTURE.md"


def test_parts_import_only_lower_layers_and_never_in_a_circle():
    graph = _part_graph()
    cycle = _cycle(graph)
    assert cycle is None, "parts import each other: " + " -> ".join(cycle)
    assert not _upward(graph, LAYERS), "imports into the same or a higher layer: " + "; ".join(_upward(graph, LAYERS))


def test_the_layer_check_catches_an_upward_and_a_circular_import():
    """The checks themselves, on issue 40's own findings: the ensemble (classify) reaching up into label/, and
    hub <-> tokenizer."""
    layers = [["hub"], ["tokenizer"], ["classify"], ["label"]]
    graph = {"hub": {"tokenizer"}, "tokenizer": {"hub"}, "classify": {"tokenizer", "label"}, "label": {"classify"}}
    assert _upward(graph, layers) == ["classify -> label", "hub -> tokenizer"]
    assert _cycle(graph) == ["classify", "label", "classify"]
    assert not _upward({"label": {"classify"}, "classify": {"hub"}, "hub": set()}, layers)


def test_the_part_graph_counts_imports_inside_functions(tmp_path, monkeypatch):
    """A lazy import (inside a function) is an edge between parts, as a module-level one is."""
    pkg = tmp_path / PACKAGE.name
    for rel, text in {"__init__.py": "", "low/__init__.py": "", "low/a.py": "def f():\n    from ..high import b\n",
                      "high/__init__.py": "", "high/b.py": "from ..low import a\n"}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", pkg)
    graph = _part_graph()
    assert graph == {"low": {"high"}, "high": {"low"}}
    assert _upward(graph, [["low"], ["high"]]) == ["low -> high"]


def test_the_top_of_the_package_holds_parts_and_a_few_shared_modules():
    top = sorted(f.stem for f in PACKAGE.glob("*.py") if f.stem not in ("__init__", "__main__"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules at the top of koelectra_kit/: {top}; give each a package"


def test_no_old_home_modules():
    assert not (PACKAGE / "utils.py").exists()

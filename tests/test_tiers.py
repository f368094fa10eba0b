"""The tiers in tests/conftest.py name tests that exist: a renamed test must not drop out of every tier unseen."""
from __future__ import annotations

import ast
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent


def _tests(module: str) -> set[str]:
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test_")}


def test_every_tier_entry_names_a_test_that_exists():
    for module in conftest.EXTENDED_MODULES | conftest.FAST_MODULES:
        assert (ROOT / module).is_file(), module
    for entry in conftest.EXTENDED_TESTS:
        module, name = entry.split("::")
        assert name in _tests(module), entry


def test_no_module_is_both_fast_and_extended():
    extended = conftest.EXTENDED_MODULES | {e.split("::")[0] for e in conftest.EXTENDED_TESTS}
    assert not conftest.FAST_MODULES & extended

"""Issue 40 moved the loose modules at the top of koelectra_kit/ into packages. For one release an old path still
imports, as the new module itself, with a DeprecationWarning that names the new path: ``import OLD``,
``from OLD import Name``, ``koelectra_kit.OLD`` as an attribute, and an old path below a package
(``koelectra_kit.finetune.output``). pyproject's filterwarnings ignores DeprecationWarning, so each test
catches it explicitly (pytest.warns records every warning whatever the filters say)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import koelectra_kit
from koelectra_kit import MOVED


def _forget(old: str) -> str:
    """The old path as if never imported (an earlier test may have); returns its full name."""
    name = f"koelectra_kit.{old}"
    sys.modules.pop(name, None)
    parent, _, child = name.rpartition(".")
    vars(importlib.import_module(parent)).pop(child, None)
    return name


def test_import_old_path_is_the_new_module_with_a_warning():
    name = _forget("classifier")
    with pytest.warns(DeprecationWarning, match=r"koelectra_kit\.classifier moved to koelectra_kit\.classify\.classifier"):
        import koelectra_kit.classifier as old
    new = importlib.import_module("koelectra_kit.classify.classifier")
    assert old is new and sys.modules[name] is new
    assert new.__spec__.name == "koelectra_kit.classify.classifier" and new.__name__ == new.__spec__.name


def test_from_old_path_import_a_name():
    _forget("tfidf")
    with pytest.warns(DeprecationWarning, match=r"koelectra_kit\.classify\.tfidf"):
        from koelectra_kit.tfidf import TfidfClassifier
    from koelectra_kit.classify.tfidf import TfidfClassifier as new

    assert TfidfClassifier is new


def test_old_path_as_an_attribute_of_the_package():
    _forget("metrics")
    with pytest.warns(DeprecationWarning, match=r"koelectra_kit\.classify\.metrics"):
        metrics = koelectra_kit.metrics
    with pytest.warns(DeprecationWarning, match=r"koelectra_kit\.io\.tables"):
        _forget("tables")
        from koelectra_kit import tables
    assert metrics.macro_f1 and tables.read_records
    with pytest.raises(AttributeError):
        koelectra_kit.no_such_module  # noqa: B018


def test_old_path_below_a_package():
    _forget("finetune.output")
    with pytest.warns(DeprecationWarning, match=r"koelectra_kit\.finetune\.output moved to koelectra_kit\.io\.output"):
        from koelectra_kit.finetune.output import check_out_dir
    from koelectra_kit.io.output import check_out_dir as new

    assert check_out_dir is new


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_path_names_a_module_that_exists_and_no_file_is_left_behind(old):
    assert not Path(koelectra_kit.__path__[0], *old.split(".")).with_suffix(".py").exists()
    importlib.import_module(f"koelectra_kit.{MOVED[old]}")
    _forget(old)
    with pytest.warns(DeprecationWarning, match=f"koelectra_kit.{MOVED[old]}"):
        importlib.import_module(f"koelectra_kit.{old}")


def test_packages_that_kept_an_old_module_name_still_answer_its_names(recwarn):
    """koelectra_kit.electra, .hub and .suggest were modules and are packages now: their names re-exported."""
    from koelectra_kit.electra import build_pretrain_model, train_step  # noqa: F401
    from koelectra_kit.hub import check_repo_id, push_folder  # noqa: F401
    from koelectra_kit.suggest import suggest_rows  # noqa: F401

    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning) and "koelectra_kit" in str(w.message)]

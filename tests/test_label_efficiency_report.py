"""examples/experiments/label_efficiency.py's report: the top tables show the first arm asked for that keeps its
TF-IDF companion, whichever arms the table has (a fixed list of such arms once left out ld1ep4)."""
from __future__ import annotations

import importlib.util
import sys
from argparse import Namespace
from pathlib import Path

import pytest


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# benchmarks/ has a common.py too: the script's own is the `common` it imports, whichever another test loaded
_EXP = Path(__file__).resolve().parent.parent / "examples" / "experiments"
_before = sys.modules.get("common")
_load("common", _EXP / "common.py")
try:
    label_efficiency = _load("label_efficiency", _EXP / "label_efficiency.py")
finally:
    if _before is None:
        del sys.modules["common"]
    else:
        sys.modules["common"] = _before

pytestmark = pytest.mark.fast


def row(seed: int, f1: float, companion: bool) -> dict:
    s = {"accuracy": f1 + 0.05, "macro_f1": f1, "binary_accuracy": f1 + 0.2}
    r = {"seed": seed, "encoder": s, "epochs": 3, "best_epoch": 3, "stopped": "completed", "minutes": 1.0}
    if companion:
        t = {"accuracy": 0.7, "macro_f1": 0.65, "binary_accuracy": 0.88}
        r.update(tfidf=t, ensemble=s, best="ensemble", best_scores=s, weights={"encoder": 0.7, "tfidf": 0.3})
    return r


@pytest.mark.parametrize("arms,lead", [(["ld1ep4", "random"], "ld1ep4"), (["random", "ld08"], "ld08"),
                                       (["random"], "default")])
def test_the_lead_arm_is_the_first_asked_for_with_a_tfidf_companion(arms, lead):
    results = {1000: {a: [row(1, 0.6 + i / 100, "ensemble=none" not in label_efficiency.ARMS[a][1])]
                      for i, a in enumerate(arms)}}
    args = Namespace(arms=arms, sizes=[1000], seeds=[1], encoder="enc")
    text = label_efficiency.report(results, {}, args)
    assert f"| labelled rows | TF-IDF | encoder, {lead} |" in text
    assert f"Arm {lead}." in text
    if lead != "default":  # the lead's own figures fill the first columns, not dashes
        f1 = 0.6 + arms.index(lead) / 100
        assert f"| 1,000 | 0.6500 | {f1:.4f} |" in text

from dataclasses import dataclass, field
from typing import Literal

import pytest

from koelectra_kit.config import load_config, parse_overrides
from koelectra_kit.errors import ConfigError


@dataclass
class Model:
    hidden_size: int = 32
    dropout: float = 0.1


@dataclass
class Run:
    out: str = "runs/x"
    corpus: list[str] = field(default_factory=list)
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    model: Model = field(default_factory=Model)
    compile: bool = False


def test_yaml_and_overrides(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("model:\n  hidden_size: 64\n  dropout: 0.0\nout: a\n")
    child = tmp_path / "child.yaml"
    child.write_text("base: base.yaml\nout: b\n")
    cfg = load_config(Run, child, ["model.dropout=0.2", "corpus=x.txt", "compile=true"])
    assert cfg.model.hidden_size == 64 and cfg.model.dropout == 0.2
    assert cfg.out == "b" and cfg.corpus == ["x.txt"] and cfg.compile is True


def test_int_accepted_for_float_and_sci_for_int():
    assert load_config(Run, None, ["model.dropout=0"]).model.dropout == 0.0
    assert load_config(Run, None, ["model.hidden_size=1e2"]).model.hidden_size == 100


@pytest.mark.parametrize("override, words", [
    (["model.hiden_size=3"], ["unknown config key 'model.hiden_size'", "did you mean model.hidden_size"]),
    (["model.hidden_size=abc"], ["model.hidden_size", "integer"]),
    (["precision=fp64"], ["precision", "one of"]),
    (["compile=maybe"], ["compile", "true/false"]),
    (["noequals"], ["key=value"]),
])
def test_errors_are_clear(override, words):
    with pytest.raises(ConfigError) as e:
        load_config(Run, None, override)
    for w in words:
        assert w in str(e.value)


def test_missing_file():
    with pytest.raises(ConfigError, match="not found"):
        load_config(Run, "nope.yaml")


def test_parse_overrides_nested():
    assert parse_overrides(["a.b.c=1", "a.d=[1,2]"]) == {"a": {"b": {"c": 1}, "d": [1, 2]}}

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from koelectra_kit.config import load_config, parse_overrides, read_yaml
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
    (["corpus=[no,yes]"], ["corpus[0]: expected a string, got False", "quote the word"]),  # YAML's booleans
])
def test_errors_are_clear(override, words):
    with pytest.raises(ConfigError) as e:
        load_config(Run, None, override)
    for w in words:
        assert w in str(e.value)


def test_false_is_none_where_none_is_a_choice():
    """`finetune ensemble=false` was "expected one of ['none', 'tfidf'], got False": false says none where a choice
    is called that; elsewhere (precision) a boolean is still refused."""
    from koelectra_kit.finetune.config import FinetuneConfig

    assert load_config(FinetuneConfig, None, ["ensemble=false", "class_weights=off"]).ensemble == "none"
    assert load_config(FinetuneConfig, None, ["class_weights=false"]).class_weights == "none"
    with pytest.raises(ConfigError, match="ensemble: expected one of"):
        load_config(FinetuneConfig, None, ["ensemble=true"])
    with pytest.raises(ConfigError, match="precision: expected one of"):
        load_config(Run, None, ["precision=false"])


def test_missing_file():
    with pytest.raises(ConfigError, match="not found"):
        load_config(Run, "nope.yaml")


def test_parse_overrides_nested():
    assert parse_overrides(["a.b.c=1", "a.d=[1,2]"]) == {"a": {"b": {"c": 1}, "d": [1, 2]}}


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").glob("*/*.yaml")))
def test_every_preset_says_its_command_and_the_command_loads(path):
    """Each shipped YAML opens with the command that uses it; that command's overrides and the YAML (with its
    ``base:`` chain) build a valid config of its stage, so a typo'd key or a wrong base fails here."""
    import shlex

    from koelectra_kit.finetune import FinetuneConfig
    from koelectra_kit.pretrain import PretrainConfig
    from koelectra_kit.tokenizer import TokenizerConfig

    stage = Path(path).parent.name
    first = (ROOT / path).read_text(encoding="utf-8").splitlines()[0]
    argv = shlex.split(first.removeprefix("# "))
    head = {"pretrain": ["koelectra-kit", "pretrain"], "finetune": ["koelectra-kit", "finetune"],
            "tokenizer": ["koelectra-kit", "tokenizer", "train"]}[stage]
    assert argv[:len(head)] == head and argv[len(head):len(head) + 2] == ["--config", path], first
    cls = {"pretrain": PretrainConfig, "finetune": FinetuneConfig, "tokenizer": TokenizerConfig}[stage]
    cfg = load_config(cls, ROOT / path, argv[len(head) + 2:])
    cfg.validate()


def test_presets_resolve_from_a_checkout_that_is_not_installed(monkeypatch):
    """A copy of the repository on PYTHONPATH (a lent GPU machine) has no koelectra_kit.presets package mapping:
    --config NAME still finds configs/."""
    from importlib import resources

    from koelectra_kit.config import preset_path

    real = resources.files

    def files(name):
        if name == "koelectra_kit.presets":
            raise ModuleNotFoundError(name)
        return real(name)

    monkeypatch.setattr(resources, "files", files)
    assert preset_path("gpu-10min", "pretrain") == ROOT / "configs" / "pretrain" / "gpu-10min.yaml"
    with pytest.raises(ConfigError, match="presets: .*gpu-10min"):
        preset_path("gpu-9min", "pretrain")


def test_a_config_key_given_twice_is_refused_and_a_yaml_error_names_its_line(tmp_path):
    """vocab_size: 2000 then vocab_size: 3000 took the last silently; a tab's error named no line."""
    from koelectra_kit.config import read_yaml

    twice = tmp_path / "twice.yaml"
    twice.write_text("vocab_size: 2000\nnormalize:\n  nfc: true\n  nfc: false\nvocab_size: 3000\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 5, column 1 \(key 'vocab_size' is given twice \(lines 1 and 5\)\)"):
        read_yaml(twice)
    twice.write_text("vocab_size: 2000\nnormalize:\n  nfc: true\n  nfc: false\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 4, column 3 \(key 'nfc' is given twice \(lines 3 and 4\)\)"):
        read_yaml(twice)
    merged = tmp_path / "merged.yaml"  # a key a merge brings in may be overridden, as YAML means
    merged.write_text("normalize: {<<: {nfc: true}, nfc: false}\n", encoding="utf-8")
    assert read_yaml(merged)["normalize"] == {"nfc": False}
    tab = tmp_path / "tab.yaml"
    tab.write_text("vocab_size: 2000\nmin_frequency:\t2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"tab.yaml: not valid YAML at line 2, column 15 \(found character"):
        read_yaml(tab)


def test_a_preset_name_given_to_a_command_without_presets_says_so():
    """`label --config cpu-30min` (a pretrain preset's name) said only "config file not found"."""
    from koelectra_kit.config import preset_path

    with pytest.raises(ConfigError, match=r"not found: cpu-30min \(not a file; label ships no presets"):
        preset_path("cpu-30min", "label")
    with pytest.raises(ConfigError, match=r"^config file not found: /no/such/label.yaml$"):
        preset_path("/no/such/label.yaml", "label")


@pytest.mark.parametrize("command", ["finetune", "baseline", "suggest", "pretrain", "distill"])
@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_a_seed_numpy_cannot_take_is_one_error_line(capsys, command, seed):
    """seed=-1 ended in numpy's traceback, deep in a split, after the data was read."""
    from koelectra_kit.cli import main

    assert main([command, f"seed={seed}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: seed={seed}: a seed is a whole number"), err


def test_overrides_on_both_sides_of_a_flag_all_count_in_order(capsys):
    """argparse gives the positional overrides one run of values: `evaluate --model M references=false --data d.csv
    text_column=x` was "unrecognized arguments: text_column=x". A leftover that is no key=value stays that error."""
    from koelectra_kit.cli import main

    # the override after --config is applied, and after the one before it (the later seed wins: its error is said)
    assert main(["finetune", "seed=1", "--config", "tiny", "seed=-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: seed=-1: a seed is a whole number"), err
    assert main(["finetune", "seed=1", "--config", "tiny", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_the_size_candidate_differs_from_its_preset_only_in_width_and_lr():
    """examples/experiments/gpu-10min-384.yaml (docs/benchmarks.md, "The size lease") is gpu-10min-subword with a
    wider encoder: a lease that compares the two compares one thing, so an edit of the preset it bases on must not
    change more than width and lr between them, and its head size stays the presets' 64."""
    import dataclasses

    from koelectra_kit.pretrain import PretrainConfig

    def flat(cfg, prefix=""):
        out = {}
        for k, v in dataclasses.asdict(cfg).items():
            out.update(flat_dict(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    def flat_dict(d, prefix):
        return {k2: v2 for k, v in d.items()
                for k2, v2 in (flat_dict(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v}).items()}

    first = (ROOT / "examples" / "experiments" / "gpu-10min-384.yaml").read_text(encoding="utf-8")
    assert "koelectra-kit pretrain --config examples/experiments/gpu-10min-384.yaml" in first
    wide = load_config(PretrainConfig, ROOT / "examples" / "experiments" / "gpu-10min-384.yaml", ["prepared=x", "out=x"])
    wide.validate()
    base = load_config(PretrainConfig, ROOT / "configs" / "pretrain" / "gpu-10min-subword.yaml", ["prepared=x", "out=x"])
    a, b = flat(wide), flat(base)
    assert {k for k in a if a[k] != b[k]} == {"model.hidden_size", "model.num_heads", "model.intermediate_size",
                                              "lr"}
    assert wide.model.hidden_size // wide.model.num_heads == 64 == base.model.hidden_size // base.model.num_heads


def test_the_hour_preset_is_the_ten_minute_recipe_on_a_model_no_smaller():
    """gpu-1h was a 6 x 256 model, uncompiled, on characters: smaller and slower than the ten-minute preset it should
    extend. An hour of one GPU gets the measured ten-minute recipe and at least its model; its peak lr follows the
    width rule of the size candidate (1e-3 x 256/hidden)."""
    from koelectra_kit.pretrain import PretrainConfig

    hour = load_config(PretrainConfig, "gpu-1h", ["prepared=x", "out=x"])
    ten = load_config(PretrainConfig, "gpu-10min-subword", ["prepared=x", "out=x"])
    assert hour.max_minutes == 60 and ten.max_minutes == 10
    for key in ("hidden_size", "num_layers", "intermediate_size"):
        assert getattr(hour.model, key) >= getattr(ten.model, key), key
    assert hour.model.hidden_size // hour.model.num_heads == 64
    for key in ("tokenizer_model", "presplit", "vocab_size", "seq_len", "compile", "compile_mode", "data_on_device",
                "precision", "batch_size"):
        assert getattr(hour, key) == getattr(ten, key), key
    assert hour.model.init == ten.model.init and hour.model.hidden_dropout == ten.model.hidden_dropout == 0
    assert hour.lr == pytest.approx(1e-3 * 256 / hour.model.hidden_size)


@pytest.mark.parametrize("stage, key, extra", [
    ("label", "threads", ["model=m", "input=x.csv", "output=y.csv"]),
    ("pretrain", "threads", ["corpus=x.txt", "out=r"]),
    ("pretrain", "num_workers", ["corpus=x.txt", "out=r"]),
    ("tokenizer", "num_workers", ["input=x.txt", "out=t"]),
    ("words", "num_workers", ["tokenizer=t", "input=x.csv"]),
])
def test_more_threads_or_workers_than_cores_is_one_config_error(stage, key, extra):
    """label --threads 100000 started threads until the system refused one: OpenBLAS's message, then a segfault."""
    import os

    from koelectra_kit.label import LabelConfig
    from koelectra_kit.pretrain import PretrainConfig
    from koelectra_kit.tokenizer.config import TokenizerConfig, WordsConfig

    cls = {"label": LabelConfig, "pretrain": PretrainConfig, "tokenizer": TokenizerConfig, "words": WordsConfig}[stage]
    cores = os.cpu_count() or 1
    with pytest.raises(ConfigError, match=f"{key}={cores + 1}: this machine has {cores} cores"):
        load_config(cls, None, [*extra, f"{key}={cores + 1}"])
    load_config(cls, None, [*extra, f"{key}={cores}"])  # all of them is fine


@pytest.mark.parametrize("text, needle", [
    ("base: loop.yaml\nlr: 1.0\n", "its base: chain comes back to it (loop.yaml -> loop.yaml)"),
    ("base: 5\n", "base: 5 should be the file name"),
    ("base: [a.yaml]\n", "base: ['a.yaml'] should be the file name"),
])
def test_a_config_whose_base_loops_or_is_no_file_name_is_one_error(tmp_path, text, needle):
    (tmp_path / "loop.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(needle)):
        read_yaml(tmp_path / "loop.yaml")
    (tmp_path / "cp949.yaml").write_bytes("lr: 1.0  # 학습률\n".encode("cp949"))
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        read_yaml(tmp_path / "cp949.yaml")


@pytest.mark.parametrize("shard", ["²/3", "1/٣", "a/b", "0/3", "4/3"])
def test_a_shard_that_is_not_ascii_k_of_n_is_one_error(shard):
    from koelectra_kit.label import LabelConfig

    with pytest.raises(ConfigError, match="use K/N"):
        LabelConfig(model="m", input="x.csv", output="y.csv", shard=shard).shard_parts()


def test_a_distill_weight_grid_too_big_to_score_is_one_error():
    """Each weighting of the teachers is scored on dev: weight_step=0.001 with 3 teachers is 501,501 (hours)."""
    from koelectra_kit.distill.config import DistillConfig

    base = ["student=s", "train=t", "out=o", "transfer=[x]", "teachers=[a,b,c]"]
    with pytest.raises(ConfigError, match="weight_step=0.001 with 3 teachers is 501,501 weightings"):
        load_config(DistillConfig, None, [*base, "weight_step=0.001"])
    load_config(DistillConfig, None, [*base, "weight_step=0.01"])  # 5,151
    load_config(DistillConfig, None, [*base, "weight_step=0.001", "teacher_weights=[1,1,1]"])  # no grid


def test_an_old_key_overrides_the_presets_new_one_and_base_names_a_preset(tmp_path, capsys):
    """`finetune --config sentiment grad_clip=1.0` was "both 'grad_clip' and its new name 'max_grad_norm' are set"
    (the preset sets max_grad_norm): a renamed key is renamed in its own layer. `base: sentiment` in a user's YAML
    was "config file not found: DIR/sentiment" where --config sentiment finds the preset."""
    from koelectra_kit.finetune import FinetuneConfig

    cfg = load_config(FinetuneConfig, "sentiment", ["grad_clip=0.5", "model=m", "train=t.csv", "out=o"])
    assert cfg.max_grad_norm == 0.5
    with pytest.raises(ConfigError, match="both 'grad_clip' and its new name 'max_grad_norm' are set"):
        load_config(FinetuneConfig, "sentiment", ["grad_clip=0.5", "max_grad_norm=2", "model=m", "train=t.csv"])
    mine = tmp_path / "mine.yaml"
    mine.write_text("# koelectra-kit finetune --config mine.yaml\nbase: sentiment\nlr: 0.0001\n", encoding="utf-8")
    cfg = load_config(FinetuneConfig, mine, ["model=m", "train=t.csv", "out=o"])
    preset = load_config(FinetuneConfig, "sentiment", ["model=m", "train=t.csv", "out=o"])
    assert cfg.lr == 0.0001 and cfg.epochs == preset.epochs and cfg.min_steps == preset.min_steps
    mine.write_text("base: sentiment\ngrad_clip: 2.0\n", encoding="utf-8")  # an old name over the base's new one
    assert load_config(FinetuneConfig, mine, ["model=m", "train=t.csv"]).max_grad_norm == 2.0
    (tmp_path / "sentiment.yaml").write_text("epochs: 7\n", encoding="utf-8")  # the file it names, beside it, wins
    mine.write_text("base: sentiment.yaml\nlr: 0.0001\n", encoding="utf-8")
    assert read_yaml(mine, "finetune") == {"epochs": 7, "lr": 0.0001}


def test_verbose_shows_the_resolved_config_for_every_config_command(tmp_path, capsys, tiny_classifier_dir, sample_dir):
    """Every --help says --verbose "also logs the resolved config"; label, evaluate, baseline, suggest and tokenizer
    train did not (only finetune's and pretrain's recipes logged it)."""
    from koelectra_kit.cli import main

    commands = [["label", "--model", str(tiny_classifier_dir), "--input", str(sample_dir / "reviews_unlabelled.csv"),
                 "--output", str(tmp_path / "o.csv"), "--no-progress"],
                ["tokenizer", "train", "--config", "tiny", f"input={sample_dir / 'comments.txt'}",
                 f"out={tmp_path / 'tok'}", "progress=false"]]
    for argv, stage in zip(commands, ("label", "tokenizer")):
        assert main([*argv, "--verbose"]) == 0
        err = capsys.readouterr().err
        assert f"resolved config ({stage}):" in err and err.count("resolved config") == 1, err
    assert main([*commands[0], "--overwrite"]) == 0
    assert "resolved config" not in capsys.readouterr().err


def test_a_text_column_for_text_files_and_a_vocabulary_too_small_are_refused_up_front(capsys):
    """text_column=document on a .txt corpus chose nothing and was recorded in prepared.json as if it had; prepare
    and pretrain with vocab_size=5 logged "training a 5-token tokenizer" before refusing it."""
    from koelectra_kit.pretrain import PretrainConfig

    with pytest.raises(ConfigError, match="text_column=document: corpus is text files, one text a line"):
        load_config(PretrainConfig, "tiny", ["corpus=[a.txt,b.TXT]", "text_column=document", "out=o"])
    from koelectra_kit.cli import main

    assert main(["tokenizer", "train", "--config", "tiny", "input=a.txt", "text_column=document", "out=o"]) == 2
    assert "error: text_column=document: input is text files" in capsys.readouterr().err
    load_config(PretrainConfig, "tiny", ["corpus=[a.txt,b.csv]", "text_column=document", "out=o"])  # b's column
    with pytest.raises(ConfigError, match="vocab_size 5 is too small"):
        load_config(PretrainConfig, "tiny", ["corpus=a.txt", "vocab_size=5", "out=o"])

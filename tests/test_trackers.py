"""report_to: the rows a run writes to metrics.jsonl, as TensorBoard and wandb receive them, read back from the files
they write (TensorBoard's event files, wandb's offline run), in a tiny pretraining run killed and resumed and a tiny
fine-tune; the values report_to takes (as transformers' Trainer spells them); and the one-line errors, before any
folder is made, for an unknown tracker, a tracker whose package is missing and wandb without a login."""
from __future__ import annotations

import json
import struct
import sys
import time

import pytest

from koelectra_kit.config import load_config
from koelectra_kit.errors import ConfigError
from koelectra_kit.finetune import FinetuneConfig
from koelectra_kit.io.trackers import Trackers, report_to_names, trackers_to_open
from koelectra_kit.pretrain import pretrain
from koelectra_kit.pretrain.curves import read_metrics
from tests.test_bad_input import assert_one_line_error, run_cli

from .fixtures_finetune import TINY_CONFIG as TINY_FT
from .fixtures_pretrain import TINY_PRESET


def numbers(rows: list[dict], prefix) -> dict[str, list[tuple[int, float]]]:
    """What a tracker should hold: every number of every row but the step (None, text and true/false are not
    numbers), as (step, value) under ``prefix(row)/field``."""
    out: dict[str, list] = {}
    for r in rows:
        for k, v in r.items():
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(f"{prefix(r)}/{k}", []).append((r["step"], v))
    return out


def tensorboard_scalars(logdir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in ``logdir``, as TensorBoard shows them (a restart's purge applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def assert_same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for tag, points in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in points], rel=1e-6), tag  # event files: fp32


def wandb_offline_run(folder) -> dict:
    """An offline wandb run under ``folder``/wandb, read back from its run-*.wandb file once wandb's own process has
    written the run's end there (``finish()`` may return a moment before)."""
    (path,) = (folder / "wandb").glob("offline-run-*/run-*.wandb")
    deadline = time.monotonic() + 30
    while (run := read_wandb_file(path))["exit_code"] is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return run


def read_wandb_file(path) -> dict:
    """The records of a run-*.wandb file (LevelDB's log format: 32 KiB blocks of [crc32 u32, length u16, type u8] +
    payload; type 1 a whole record, 2-4 its first/middle/last part) as history, config, project and exit code."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert not data or data[:4] == b":W&B"
    pos, payload, records = 7, b"", []
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            break
        payload += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            records.append(record)
            payload = b""
    run = {"history": {}, "config": {}, "exit_code": None}
    for r in records:
        kind = r.WhichOneof("record_type")
        if kind == "run":
            run["project"] = r.run.project
            run["config"].update({i.key: json.loads(i.value_json) for i in r.run.config.update
                                  if not i.key.startswith("_")})
        elif kind == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            for k, v in items.items():
                if not k.startswith("_"):
                    run["history"].setdefault(k, []).append((r.history.step.num, v))
        elif kind == "exit":
            run["exit_code"] = r.exit.exit_code
    return run


@pytest.fixture
def tensorboard():
    pytest.importorskip("tensorboard", reason="the TensorBoard checks need tensorboard (pip install -e '.[dev]')")


@pytest.fixture
def wandb_offline(monkeypatch, tmp_path):
    """wandb installed, logging offline, its own folders inside the test's; its process-wide settings (offline)
    dropped after the test."""
    wandb = pytest.importorskip("wandb", reason="the wandb checks need wandb (pip install -e '.[dev]')")
    for key, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONSOLE": "off",
                       "WANDB_CONFIG_DIR": tmp_path / "wandb-config", "WANDB_CACHE_DIR": tmp_path / "wandb-cache",
                       "WANDB_DATA_DIR": tmp_path / "wandb-data"}.items():
        monkeypatch.setenv(key, str(value))
    for key in ("WANDB_PROJECT", "WANDB_NAME", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(key, raising=False)
    yield
    wandb.teardown()


# -- report_to's values ----------------------------------------------------------------------------------------------


def test_report_to_takes_the_values_trainer_spells():
    assert report_to_names("none") == [] and report_to_names([]) == []
    assert report_to_names("tensorboard") == ["tensorboard"]
    assert report_to_names(["wandb", "tensorboard", "wandb"]) == ["wandb", "tensorboard"]
    assert report_to_names("all") == ["all"]
    cfg = load_config(FinetuneConfig, TINY_FT, ["report_to=[tensorboard,wandb]"])  # the key=value list dialect
    assert cfg.report_to == ["tensorboard", "wandb"]
    with pytest.raises(ConfigError, match=r"unknown tracker 'tensorbord'; use one of none, all, tensorboard, wandb"):
        load_config(FinetuneConfig, TINY_FT, ["report_to=[tensorbord]"])
    with pytest.raises(ConfigError, match="'none' cannot be combined"):
        report_to_names(["none", "wandb"])


def test_all_is_every_installed_tracker_and_a_named_missing_one_says_which_extra(tensorboard, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb fails, as where it is not installed
    assert trackers_to_open("all") == ["tensorboard"]
    with pytest.raises(ConfigError, match=r'=wandb needs the wandb package: pip install "koelectra-kit\[wandb\]"'):
        trackers_to_open(["tensorboard", "wandb"])
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    assert trackers_to_open("all") == []
    assert trackers_to_open("none") == []


# -- TensorBoard and wandb get the rows of metrics.jsonl ------------------------------------------------------------


def test_a_pretraining_run_killed_and_resumed_shows_tensorboard_what_metrics_jsonl_holds(tensorboard, tiny_cfg,
                                                                                          tmp_path):
    """Ctrl-C at step 3 (last checkpoint: step 2): the event files are closed and hold steps 1-3. Resumed to step 4:
    TensorBoard drops the killed run's step 3, as metrics.jsonl does, and shows the resumed run's."""
    common = ("report_to=tensorboard", "max_steps=4", "save_every=2")

    def ctrl_c(step, row):
        if step == 3:
            raise KeyboardInterrupt

    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        pretrain(tiny_cfg(*common), on_step=ctrl_c)
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert_same(tensorboard_scalars(out / "runs"), numbers(rows, lambda r: "pretrain"))

    pretrain(tiny_cfg(*common, "resume=true"))
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    scalars = tensorboard_scalars(out / "runs")
    assert_same(scalars, numbers(rows, lambda r: "pretrain"))
    assert {"pretrain/loss", "pretrain/gen_loss", "pretrain/disc_loss", "pretrain/lr"} <= set(scalars)
    assert "pretrain/on_plateau" not in scalars  # true/false is not a number


def test_without_report_to_a_run_writes_no_tracker_files(tiny_cfg, tmp_path):
    pretrain(tiny_cfg("max_steps=1"))
    assert (tmp_path / "run" / "metrics.jsonl").is_file()
    assert not (tmp_path / "run" / "runs").exists() and not (tmp_path / "run" / "wandb").exists()


def test_a_fine_tune_shows_both_trackers_its_train_and_eval_rows(tensorboard, wandb_offline, capsys, tmp_path,
                                                                tiny_encoder_dir, sample_dir):
    """The staging folder's event files and wandb run end up in OUT (runs/, wandb/), with every row."""
    out = tmp_path / "ft"
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={tiny_encoder_dir}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "epochs=0.5", "log_every=2",
                         "eval_every=5", "ensemble=none", "references=false", "plots=false", "progress=false",
                         "report_to=[tensorboard,wandb]")
    assert rc == 0, err
    assert not list(tmp_path.glob(".ft.*"))  # no staging folder left
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["kind"] for r in rows} == {"train", "eval"}
    want = numbers(rows, lambda r: r["kind"])
    assert {"train/loss", "train/lr", "eval/loss", "eval/macro_f1"} <= set(want)
    assert_same(tensorboard_scalars(out / "runs"), want)
    run = wandb_offline_run(out)
    assert run["project"] == "koelectra-kit" and run["exit_code"] == 0
    assert run["config"]["report_to"] == ["tensorboard", "wandb"] and run["config"]["log_every"] == 2
    assert_same(run["history"], want)


def test_a_failed_run_closes_its_trackers_and_wandb_marks_it_failed(tensorboard, wandb_offline, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with Trackers(["tensorboard", "wandb"], tmp_path, {"lr": 0.1}, name="x") as trackers:
            trackers.log({"step": 5, "loss": 2.5, "note": "text", "auc": None}, "train")
            raise KeyboardInterrupt
    assert trackers.open == []
    assert tensorboard_scalars(tmp_path / "runs") == {"train/loss": [(5, 2.5)]}
    run = wandb_offline_run(tmp_path)
    assert run["history"] == {"train/loss": [(5, 2.5)]} and run["config"] == {"lr": 0.1}
    assert run["exit_code"] == 1


# -- errors before any folder is made ------------------------------------------------------------------------------


@pytest.fixture
def pretrain_argv(sample_dir, tmp_path):
    return ["pretrain", "--config", TINY_PRESET, f"corpus={sample_dir / 'comments.txt'}", f"out={tmp_path / 'o'}",
            "progress=false"]


@pytest.fixture
def finetune_argv(sample_dir, tmp_path, tiny_encoder_dir):
    return ["finetune", "--config", TINY_FT, f"model={tiny_encoder_dir}",
            f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'o'}", "progress=false"]


@pytest.mark.parametrize("stage", ["pretrain", "finetune"])
def test_an_unknown_tracker_is_one_line_naming_the_valid_ones(capsys, request, tmp_path, stage):
    rc, _, err = run_cli(capsys, *request.getfixturevalue(f"{stage}_argv"), "report_to=nope")
    assert_one_line_error(rc, err, "report_to: unknown tracker 'nope'", "none, all, tensorboard, wandb")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("stage", ["pretrain", "finetune"])
def test_a_tracker_not_installed_says_which_extra_before_any_work(capsys, monkeypatch, request, tmp_path, stage):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    rc, _, err = run_cli(capsys, *request.getfixturevalue(f"{stage}_argv"), "report_to=tensorboard")
    assert_one_line_error(rc, err, 'pip install "koelectra-kit[tensorboard]"')
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob(".o.partial-*"))


def test_wandb_without_a_login_is_one_line_before_any_work(capsys, monkeypatch, pretrain_argv, tmp_path):
    pytest.importorskip("wandb", reason="the wandb checks need wandb (pip install -e '.[dev]')")
    for key in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_CONFIG_DIR", "WANDB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc key
    monkeypatch.setenv("NETRC", str(tmp_path / "home" / ".netrc"))
    rc, _, err = run_cli(capsys, *pretrain_argv, "report_to=wandb")
    assert_one_line_error(rc, err, "report_to=wandb: ", "WANDB_MODE=offline")
    assert not (tmp_path / "o").exists()
    # all: every installed tracker that can start; wandb without a login is left out with a note, not an error
    assert trackers_to_open("all") == ["tensorboard"]
    assert "report_to=all leaves wandb out" in capsys.readouterr().err

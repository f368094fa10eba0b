"""Hostile input to `pretrain` and `prepare` found by an audit: checkpoints whose files parse but hold something
else, a run folder whose checkpoint pointer is gone, a prepared folder whose meta.json lacks what the run reads or
whose tokenizer has another vocabulary, and a batch far beyond the machine's memory. Each is one `error:` line
(exit 2), never a traceback, an OS kill, or a fresh start over an earlier run's checkpoints."""
from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from koelectra_kit.cli import main
from koelectra_kit.errors import ConfigError, InputError
from koelectra_kit.pretrain import pretrain, read_metrics

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "pretrain" / "tiny.yaml"


def one_line_error(capsys, argv, *needles):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def resave_sizes(ckpt: Path) -> None:
    """meta.json's file sizes made the files' own: the size check passes, and what is inside is what is tested."""
    meta = json.loads((ckpt / "meta.json").read_text())
    meta["files"] = {f.name: f.stat().st_size for f in ckpt.iterdir() if f.name != "meta.json"}
    (ckpt / "meta.json").write_text(json.dumps(meta))


def test_checkpoint_json_that_parses_but_is_not_a_record_is_damaged(tiny_cfg, tmp_path):
    """A meta.json or latest.json that is valid JSON of another shape raised AttributeError / TypeError."""
    pretrain(tiny_cfg("max_steps=2", "save_every=2"))
    root = tmp_path / "run" / "checkpoints"
    meta, pointer = root / "step-00000002" / "meta.json", root / "latest.json"
    good_meta, good_pointer = meta.read_text(), pointer.read_text()
    for text in ("[1, 2]", '{"files": [1], "step": 2}'):
        meta.write_text(text)
        with pytest.raises(InputError, match="step-00000002 is damaged"):
            pretrain(tiny_cfg("max_steps=3", "resume=true"))
    meta.write_text(good_meta)
    for text in ("[1]", '{"checkpoint": 5}', '{"checkpoint": null}'):
        pointer.write_text(text)
        with pytest.raises(InputError, match="latest.json is damaged"):
            pretrain(tiny_cfg("max_steps=3", "resume=true"))
    pointer.write_text(good_pointer)
    assert pretrain(tiny_cfg("max_steps=3", "resume=true"))["steps"] == 3


def test_optimizer_or_loop_state_of_the_right_size_but_other_content_is_damaged(tiny_cfg, tmp_path):
    """Files that load with weights_only=True but are not this run's (another optimizer's state, a state.pt without
    its RNG streams) raised torch's ValueError or a KeyError from inside the resume."""
    pretrain(tiny_cfg("max_steps=2", "save_every=2"))
    ckpt = tmp_path / "run" / "checkpoints" / "step-00000002"
    opt, state = (ckpt / "optimizer.pt").read_bytes(), (ckpt / "state.pt").read_bytes()

    torch.save({"optimizer": {"state": {}, "param_groups": []}, "scaler": None}, ckpt / "optimizer.pt")
    resave_sizes(ckpt)
    with pytest.raises(InputError, match="damaged.*optimizer.pt does not match the model"):
        pretrain(tiny_cfg("max_steps=3", "resume=true"))
    (ckpt / "optimizer.pt").write_bytes(opt)

    saved = torch.load(ckpt / "state.pt", weights_only=True)
    del saved["rng"]
    torch.save(saved, ckpt / "state.pt")
    resave_sizes(ckpt)
    with pytest.raises(InputError, match="damaged.*state.pt holds no loop state"):
        pretrain(tiny_cfg("max_steps=3", "resume=true"))
    torch.save([1, 2, 3], ckpt / "state.pt")
    resave_sizes(ckpt)
    with pytest.raises(InputError, match="damaged.*state.pt holds no loop state"):
        pretrain(tiny_cfg("max_steps=3", "resume=true"))

    (ckpt / "state.pt").write_bytes(state)
    resave_sizes(ckpt)
    assert pretrain(tiny_cfg("max_steps=3", "resume=true"))["steps"] == 3


def test_checkpoints_without_a_pointer_to_them_are_not_started_over(tiny_cfg, tmp_path):
    """With latest.json's folder gone (deleted, or a kill between publishing a checkpoint and pointing at it), the
    same command without resume= started a fresh run in the folder: its metrics appended to the old run's and its
    saves pruned the old run's checkpoints, with no overwrite=true; resume=true said there was no checkpoint."""
    pretrain(tiny_cfg("max_steps=4", "save_every=2", "keep_checkpoints=2"))
    run = tmp_path / "run"
    shutil.rmtree(run / "checkpoints" / "step-00000004")
    with pytest.raises(ConfigError, match="already holds a run's checkpoints"):
        pretrain(tiny_cfg("max_steps=4", "save_every=2", "keep_checkpoints=1"))
    (run / "checkpoints" / "latest.json").unlink()
    with pytest.raises(ConfigError, match="already holds a run's checkpoints"):
        pretrain(tiny_cfg("max_steps=4", "save_every=2", "keep_checkpoints=1"))
    assert (run / "checkpoints" / "step-00000002").is_dir()
    with pytest.raises(InputError, match=r"pass resume=.*step-00000002 \(the newest there\)"):
        pretrain(tiny_cfg("max_steps=4", "resume=true"))
    summary = pretrain(tiny_cfg("max_steps=4", f"resume={run / 'checkpoints' / 'step-00000002'}"))
    assert summary["steps"] == 4
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2, 3, 4]


@pytest.mark.parametrize("edit", ["del meta['tokenizer_fingerprint']", "meta['tokens'] = 'many'",
                                  "meta['texts'] = None"])
def test_a_prepared_meta_json_without_what_the_run_reads_is_one_line(prepared, tmp_path, capsys, edit):
    """A KeyError (no tokenizer fingerprint) or a TypeError (counts that are not numbers) was a traceback."""
    folder = tmp_path / "prepared"
    shutil.copytree(prepared, folder)
    meta = json.loads((folder / "meta.json").read_text())
    exec(edit)
    (folder / "meta.json").write_text(json.dumps(meta))
    one_line_error(capsys, ["pretrain", "--config", TINY, f"prepared={folder}", f"out={tmp_path / 'run'}",
                            "progress=false", "max_steps=2"], "meta.json lacks")
    assert not (tmp_path / "run").exists()


def test_a_prepared_tokenizer_of_another_vocabulary_is_one_line(prepared, tmp_path, capsys, sample_dir):
    """A tokenizer/ of another vocabulary whose digest prepared.json was made to match (the check of its files
    passes) trained until the first id past its embedding table: an IndexError traceback from torch."""
    from koelectra_kit.pretrain.prepared import files_digest
    from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

    folder = tmp_path / "prepared"
    shutil.copytree(prepared, folder)
    shutil.rmtree(folder / "tokenizer")
    train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(folder / "tokenizer"),
                                    vocab_size=1000))
    info = json.loads((folder / "prepared.json").read_text())
    info["tokenizer_files"] = files_digest(folder / "tokenizer")
    (folder / "prepared.json").write_text(json.dumps(info))
    capsys.readouterr()  # the tokenizer's training log
    one_line_error(capsys, ["pretrain", "--config", TINY, f"prepared={folder}", f"out={tmp_path / 'run'}",
                            "progress=false", "max_steps=2"], "vocabulary", "do not belong together")


def test_a_batch_far_beyond_memory_is_one_line_before_anything_is_written(tiny_cfg, tmp_path, capsys,
                                                                          pretrain_tokenizer):
    """batch_size=1e9 spent minutes drawing epoch orders for a billion rows, then the OS killed the run (exit 137,
    no message)."""
    with address_space_capped():  # should the check regress: a MemoryError here, not the OS killing the tests
        with pytest.raises(ConfigError, match="batch_size 1000000000 .* lower batch_size or raise grad_accum"):
            pretrain(tiny_cfg("batch_size=1000000000"))
        assert not (tmp_path / "run").exists()
        one_line_error(capsys, ["pretrain", "--config", TINY, f"corpus={ROOT / 'corpora' / 'sample' / 'comments.txt'}",
                                f"tokenizer={pretrain_tokenizer}", f"out={tmp_path / 'cli'}", "batch_size=1e9"],
                       "lower batch_size")


@contextlib.contextmanager
def address_space_capped(extra: int = 2 << 30):
    """This process may map at most ``extra`` bytes more than it has now (Linux), put back after."""
    resource = pytest.importorskip("resource")
    try:
        size = int(next(ln for ln in Path("/proc/self/status").read_text().splitlines()
                        if ln.startswith("VmSize:")).split()[1]) * 1024
    except (OSError, StopIteration):
        pytest.skip("no /proc/self/status to size the cap from")
    before = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


def test_a_batch_the_allocator_refuses_mid_step_is_one_line(tiny_cfg, monkeypatch):
    """Between the floor above and what really fits, the allocator's failure at the first step was torch's
    traceback ("DefaultCPUAllocator: can't allocate memory")."""
    import koelectra_kit.electra.model as electra

    def no_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                           "memory: you tried to allocate 1638400000 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(electra, "train_step", no_memory)
    with pytest.raises(ConfigError, match=r"batch_size 16 .* does not fit in memory \(1.5 GiB asked for at once\); "
                                          "lower batch_size"):
        pretrain(tiny_cfg("max_steps=2"))


def test_a_pickled_weights_file_torch_refuses_is_one_line(tmp_path, tiny_classifier_dir, capsys):
    """A folder whose pytorch_model.bin pickles a global: transformers loads it with weights_only=True, so nothing
    runs, but the UnpicklingError escaped as a traceback (label, finetune, init= all load through hub.loading)."""
    import datetime
    import shutil

    import torch

    from koelectra_kit.cli import main

    model = tmp_path / "model"
    shutil.copytree(tiny_classifier_dir, model)
    (model / "model.safetensors").unlink()
    torch.save({"weight": datetime.datetime(2020, 1, 1)}, model / "pytorch_model.bin")
    (tmp_path / "in.csv").write_text("review\n좋아요\n", encoding="utf-8")
    rc = main(["label", "--model", str(model), "--input", str(tmp_path / "in.csv"), "--output",
               str(tmp_path / "out.csv"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and err.startswith("error: "), err
    assert "safe loading (weights_only) refuses" in err and "weights_only=False" not in err, err
    assert not (tmp_path / "out.csv").exists()

"""End-to-end pretraining tests on the bundled sample corpus with the tiny preset: losses fall, exports load
with transformers and reproduce the toolkit's hidden states, exact resume, checkpoint failure modes, bad
input, the mlm objective, time budgets, and a 2-process torchrun (gloo) run."""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import torch

from koelectra_kit.cli import main
from tests.launch import torchrun
from koelectra_kit.errors import ConfigError, InputError, KitError
from koelectra_kit.pretrain import pretrain, read_metrics

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "pretrain" / "tiny.yaml"
DIAGNOSTICS = {"step", "tokens", "elapsed_s", "loss", "gen_loss", "disc_loss", "gen_acc", "gen_unigram_acc", "disc_acc",
               "disc_precision", "disc_recall", "disc_auc", "replaced_frac", "lr", "disc_weight", "tokens_per_s",
               "on_plateau"}


def mean(xs):
    return sum(xs) / len(xs)


def test_tiny_preset_learns_and_writes_everything(tiny_run):
    rows = read_metrics(tiny_run / "metrics.jsonl")
    assert len(rows) == 12 and rows[-1]["step"] == 120
    assert DIAGNOSTICS <= set(rows[0])
    first, last = rows[:2], rows[-2:]
    assert mean([r["gen_loss"] for r in last]) < mean([r["gen_loss"] for r in first]) - 0.5
    assert mean([r["disc_loss"] for r in last]) < mean([r["disc_loss"] for r in first]) - 0.05
    assert all(0 < r["replaced_frac"] < 0.15 for r in rows)  # only masked tokens can be replaced
    assert rows[-1]["tokens"] > rows[0]["tokens"] > 0
    assert (tiny_run / "curves.png").stat().st_size > 10_000
    assert (tiny_run / "tokenizer" / "tokenizer.json").exists()  # trained by the run (no tokenizer= given)
    saved = (tiny_run / "config.yaml").read_text(encoding="utf-8")
    assert "seq_len: 64" in saved and "hidden_size: 64" in saved
    summary = json.loads((tiny_run / "summary.json").read_text())
    assert summary["steps"] == 120 and summary["ranks_in_sync"]
    assert sorted(p.name for p in (tiny_run / "checkpoints").glob("step-*")) == ["step-00000120"]  # keep 1


def test_export_loads_with_transformers_and_matches_toolkit(tiny_run):
    from safetensors.torch import load_model
    from transformers import AutoModel, ElectraForMaskedLM, ElectraForSequenceClassification

    from koelectra_kit.electra import model as electra
    from koelectra_kit.config import load_config
    from koelectra_kit.pretrain import PretrainConfig
    from koelectra_kit.tokenizer import KoTokenizer

    disc_dir, gen_dir = tiny_run / "discriminator", tiny_run / "generator"
    tok = KoTokenizer.from_pretrained(disc_dir)  # the tokenizer travels with the model
    cfg = load_config(PretrainConfig, tiny_run / "config.yaml")
    own = electra.build_pretrain_model(tok.vocab_size, tok.pad_token_id, tok.all_special_ids, cfg.model,
                                       cfg.generator, cfg.objective, cfg.model.max_position_embeddings)
    load_model(own, str(tiny_run / "checkpoints" / "step-00000120" / "model.safetensors"))
    own.eval()
    batch = tok.encode_batch(["이 영화 정말 재밌어요 ㅋㅋ", "별로였다"], padding="longest", return_tensors="pt")
    ids, attn = batch["input_ids"], batch["attention_mask"]

    auto = AutoModel.from_pretrained(disc_dir).eval()
    assert type(auto).__name__ == "ElectraModel" and auto.config.hidden_size == 64
    from koelectra_kit.tokenizer.saving import vocab_digest

    for folder in (disc_dir, gen_dir):  # which vocabulary the weights were trained with (check_model_vocab)
        assert json.loads((folder / "config.json").read_text())["koelectra_kit"]["vocab_digest"] == vocab_digest(tok)
    with torch.no_grad():
        ours = own.discriminator.electra(ids, attention_mask=attn).last_hidden_state
        theirs = auto(input_ids=ids, attention_mask=attn).last_hidden_state
    assert torch.allclose(ours, theirs, atol=1e-5)
    clf = ElectraForSequenceClassification.from_pretrained(disc_dir, num_labels=3).eval()
    assert torch.allclose(clf.electra(ids, attention_mask=attn).last_hidden_state, theirs, atol=1e-5)

    gen = ElectraForMaskedLM.from_pretrained(gen_dir).eval()
    assert gen.config.hidden_size == 32 and gen.config.embedding_size == auto.config.embedding_size
    assert torch.equal(gen.electra.embeddings.word_embeddings.weight, auto.embeddings.word_embeddings.weight)
    with torch.no_grad():
        ref = own.generator(ids, attention_mask=attn).logits
        assert torch.allclose(gen(ids, attention_mask=attn).logits, ref, atol=1e-4)


def test_plot_and_print_config_commands(tiny_run, capsys):
    (tiny_run / "curves.png").unlink()
    assert main(["pretrain", "plot", str(tiny_run)]) == 0
    assert (tiny_run / "curves.png").stat().st_size > 10_000
    assert main(["pretrain", "--config", str(TINY), "--print-config", "corpus=a.txt", "out=o", "lr=0.01"]) == 0
    printed = capsys.readouterr().out
    assert "lr: 0.01" in printed and "seq_len: 64" in printed


def killed_and_resumed(tiny_cfg, tmp_path, common: tuple, kill_step: int) -> tuple[dict, dict]:
    """(the summary of a run of ``common`` in tmp_path/full, that of the same run killed after ``kill_step`` and
    resumed in tmp_path/cut)."""
    full = pretrain(tiny_cfg(*common, f"out={tmp_path / 'full'}"))

    class Killed(Exception):
        pass

    def kill(step, row):
        if step == kill_step:
            raise Killed

    with pytest.raises(Killed):
        pretrain(tiny_cfg(*common, f"out={tmp_path / 'cut'}"), on_step=kill)
    return full, pretrain(tiny_cfg(*common, f"out={tmp_path / 'cut'}", "resume=true"))


def test_exact_resume_after_a_kill(tiny_cfg, tmp_path):
    """Killed after step 6 (last checkpoint: step 4) and resumed: steps 5-8 match an uninterrupted run
    exactly, with dropout and gradient accumulation on (all RNG streams and the data position restored)."""
    common = ("max_steps=8", "save_every=4", "model.hidden_dropout=0.1", "model.attention_dropout=0.1",
              "grad_accum=2")
    full, resumed = killed_and_resumed(tiny_cfg, tmp_path, common, 6)

    def strip(rows):
        return [{k: v for k, v in r.items() if k not in ("elapsed_s", "tokens_per_s")} for r in rows]

    a = strip(read_metrics(tmp_path / "full" / "metrics.jsonl"))
    b = strip(read_metrics(tmp_path / "cut" / "metrics.jsonl"))
    assert [r["step"] for r in b] == list(range(1, 9))  # the killed run's steps 5-6 were replaced
    assert a == b
    assert full["rank_param_digests"] == resumed["rank_param_digests"]


def test_a_resume_that_logs_no_row_keeps_the_uninterrupted_runs_summary(tiny_cfg, tmp_path):
    """Metrics every 4 steps, killed at step 5 and resumed from step 4 to 6: its summary had final: null (and no
    below-unigram warning) where the uninterrupted run has a row. Both end with the budget's last row (steps 5-6)."""
    common = ("max_steps=6", "save_every=4", "log_every=4")
    full, resumed = killed_and_resumed(tiny_cfg, tmp_path, common, 5)

    def strip(row):
        return {k: v for k, v in row.items() if k not in ("elapsed_s", "tokens_per_s")}

    assert full["final"]["step"] == 6 and strip(resumed["final"]) == strip(full["final"])
    assert [r["step"] for r in read_metrics(tmp_path / "cut" / "metrics.jsonl")] == [4, 6]
    assert resumed.get("warning") == full.get("warning")
    assert resumed["rank_param_digests"] == full["rank_param_digests"]


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_ctrl_c_stops_at_a_step_and_exports_and_a_rerun_continues_exactly(tiny_cfg, tmp_path, capsys, signame,
                                                                          terminal_sigint):
    """Ctrl-C (or a scheduler's SIGTERM, a lease running out) no longer loses the run's last minutes: the step in
    flight ends, its checkpoint and the encoder at that step are written, and the same command continues from there
    to the uninterrupted run's exact weights."""
    import os
    import signal

    from safetensors.torch import load_file

    common = ("max_steps=6", "save_every=100", "save_every_minutes=0", "model.hidden_dropout=0.1")
    full = pretrain(tiny_cfg(*common, f"out={tmp_path / 'full'}"))

    def interrupt(step, row):
        if step == 3:
            os.kill(os.getpid(), getattr(signal, signame))

    if signame == "SIGINT":  # from Python, Ctrl-C raises once the run is written: the caller's code stops too
        from koelectra_kit.errors import Interrupted

        with pytest.raises(Interrupted) as e:
            pretrain(tiny_cfg(*common, f"out={tmp_path / 'cut'}"), on_step=interrupt)
        cut = e.value.result
    else:  # a scheduler's SIGTERM returns, the summary saying "interrupted"
        cut = pretrain(tiny_cfg(*common, f"out={tmp_path / 'cut'}"), on_step=interrupt)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back
    assert cut["steps"] == 3 and cut["stopped"] == "interrupted" and full["stopped"] == "completed"
    assert (tmp_path / "cut" / "discriminator" / "model.safetensors").is_file()
    err = capsys.readouterr().err
    assert f"{signame}: pretraining stops after this step" in err and "interrupted at step 3" in err
    resumed = pretrain(tiny_cfg(*common, f"out={tmp_path / 'cut'}", "resume=true"))
    assert resumed["steps"] == 6 and resumed["stopped"] == "completed"
    assert resumed["rank_param_digests"] == full["rank_param_digests"]
    a, b = (load_file(tmp_path / n / "discriminator" / "model.safetensors") for n in ("full", "cut"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_the_budgets_last_steps_get_a_row_and_the_card_says_where_the_run_ended(tiny_cfg, tmp_path):
    """A run shorter than log_every (cpu-30min logs every 100 steps and stops on a time budget) left metrics.jsonl
    empty, no curves.png, summary final null and a model card of "? steps, 0 tokens seen"; one that ended between
    two rows had a card of the last row's steps. The budget's last steps get their row; the card says the run's."""
    done = pretrain(tiny_cfg("max_steps=5", "log_every=100", "plots=true", f"out={tmp_path / 'short'}"))
    rows = read_metrics(tmp_path / "short" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [5] and done["final"]["step"] == 5 and "curves" in done
    card = (tmp_path / "short" / "discriminator" / "README.md").read_text(encoding="utf-8")
    assert f"{done['tokens']:,} tokens seen" in card and "- Recipe: 5 steps, batch" in card
    assert "precision auto" not in card and ("precision fp32" in card or "precision bfloat16" in card)

    import os
    import signal

    def stop(step, row):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    cut = pretrain(tiny_cfg("max_steps=8", "log_every=2", f"out={tmp_path / 'cut'}"), on_step=stop)
    card = (tmp_path / "cut" / "discriminator" / "README.md").read_text(encoding="utf-8")
    assert cut["steps"] == 3 and "- Recipe: 3 steps (stopped before the end of its budget)" in card
    assert "(the last logged row, step 2)" in card
    assert [r["step"] for r in read_metrics(tmp_path / "cut" / "metrics.jsonl")] == [2]  # a stop logs no extra row


def test_a_finished_run_resumed_or_extended_logs_each_step_once(tiny_cfg, tmp_path):
    """A checkpoint taken at the budget's last step held that row's unlogged window: resume=true of the finished run
    ended in an UnboundLocalError (no step, no lr to log the row with), and an extended budget counted those steps in
    two rows. The checkpoint is written again once the last row is logged."""
    common = ("max_steps=6", "log_every=4", "save_every=3", f"out={tmp_path / 'r'}")
    done = pretrain(tiny_cfg(*common))
    again = pretrain(tiny_cfg(*common, "resume=true"))
    assert again["steps"] == 6 and again["rank_param_digests"] == done["rank_param_digests"]
    assert [r["step"] for r in read_metrics(tmp_path / "r" / "metrics.jsonl")] == [4, 6]
    pretrain(tiny_cfg(*common[1:], "max_steps=9", "resume=true"))
    rows = read_metrics(tmp_path / "r" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [4, 6, 8, 9]


def test_existing_run_needs_resume_or_overwrite(tiny_cfg):
    pretrain(tiny_cfg("max_steps=2"))
    with pytest.raises(ConfigError, match="resume=true"):
        pretrain(tiny_cfg("max_steps=2"))
    summary = pretrain(tiny_cfg("max_steps=3", "overwrite=true"))
    assert summary["steps"] == 3
    # resume with a larger budget continues from step 3
    assert pretrain(tiny_cfg("max_steps=5", "resume=true"))["steps"] == 5


def test_resume_with_max_steps_below_the_checkpoints_step_is_refused(tiny_cfg, tmp_path):
    """A resume whose max_steps the checkpoint is already past stopped at once and exported the checkpoint's step-4
    weights as a 'done: 4 steps' run for max_steps=2, without a word; now one line, before out/ is touched."""
    pretrain(tiny_cfg("max_steps=4", "save_every=2"))
    with pytest.raises(ConfigError, match="max_steps=2 is below step 4, where checkpoint .*step-00000004"):
        pretrain(tiny_cfg("max_steps=2", "resume=true"))
    assert "max_steps: 4" in (tmp_path / "run" / "config.yaml").read_text()
    assert pretrain(tiny_cfg("max_steps=4", "resume=true"))["steps"] == 4  # the budget it reached: still fine


def test_truncated_or_corrupt_checkpoint_is_a_clear_error(tiny_cfg, tmp_path):
    pretrain(tiny_cfg("max_steps=2"))
    ckpt = tmp_path / "run" / "checkpoints" / "step-00000002"
    weights = ckpt / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="damaged.*truncated"):
        pretrain(tiny_cfg("max_steps=3", "resume=true"))
    weights.write_bytes(b"\xff" * len(data))  # same size, garbage header
    with pytest.raises(InputError, match="damaged.*model.safetensors"):
        pretrain(tiny_cfg("max_steps=3", "resume=true"))
    weights.write_bytes(data)
    state = ckpt / "state.pt"
    raw = state.read_bytes()
    state.write_bytes(raw[:100] + b"\0" * (len(raw) - 100))
    with pytest.raises(InputError, match="damaged"):
        pretrain(tiny_cfg("max_steps=3", "resume=true"))


def test_resume_with_another_tokenizer_is_refused(tiny_cfg, tmp_path, sample_dir):
    from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

    pretrain(tiny_cfg("max_steps=2"))
    other = tmp_path / "other_tok"
    train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(other), vocab_size=1500))
    with pytest.raises(InputError, match="another tokenizer"):
        pretrain(tiny_cfg("max_steps=3", "resume=true", f"tokenizer={other}"))
    with pytest.raises(ConfigError, match="a resume keeps the checkpoint's model"):
        pretrain(tiny_cfg("max_steps=3", "resume=true", "model.hidden_size=32"))
    # dropout is no shape: it was refused as "the model shape can't change"
    with pytest.raises(ConfigError, match=r"model.hidden_dropout .* keeps the checkpoint's model \(shape, dropout"):
        pretrain(tiny_cfg("max_steps=3", "resume=true", "model.hidden_dropout=0.3"))


def test_a_resume_without_the_tokenizer_it_was_trained_with_names_it(tiny_cfg, tmp_path, sample_dir):
    """Without tokenizer= a resume trained a tokenizer into out/tokenizer first (Kiwi over the whole corpus), then
    was refused as 'another tokenizer'; now the key left out is named before any work."""
    from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

    given = tmp_path / "tok1500"
    train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(given), vocab_size=1500))
    pretrain(tiny_cfg(f"tokenizer={given}", "max_steps=2", "save_every=2"))
    with pytest.raises(ConfigError, match=f"trained with tokenizer={given}: pass it again"):
        pretrain(tiny_cfg("tokenizer=null", "max_steps=3", "resume=true"))
    assert not (tmp_path / "run" / "tokenizer").exists()


def test_disk_full_while_saving_keeps_the_previous_checkpoint(tiny_cfg, tmp_path, monkeypatch):
    import safetensors.torch

    real_save = safetensors.torch.save_model
    calls = []

    def failing_save(model, filename, *a, **kw):
        calls.append(filename)
        if len(calls) == 2:  # the step-4 checkpoint: write part of the file, then the disk is full
            Path(filename).write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(model, filename, *a, **kw)

    monkeypatch.setattr(safetensors.torch, "save_model", failing_save)
    with pytest.raises(KitError, match="No space left on device.*step-00000002 is intact"):
        pretrain(tiny_cfg("max_steps=6", "save_every=2"))
    root = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["latest.json", "step-00000002"]  # no partial dir left
    assert json.loads((root / "latest.json").read_text())["step"] == 2
    monkeypatch.setattr(safetensors.torch, "save_model", real_save)
    assert pretrain(tiny_cfg("max_steps=6", "save_every=2", "resume=true"))["steps"] == 6


@pytest.mark.parametrize("content, msg", [
    (b"", "empty"),
    (b"\n  \n\n", "no text"),
    ("짧은 한 줄\n".encode(), "too small"),
    (b"\xff\xfe\xfa broken bytes \x80\x81\n" * 50, "byte|decode|encoding|UTF-8|utf-8"),
])
def test_bad_corpus_is_a_one_line_error(tiny_cfg, tmp_path, content, msg):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    with pytest.raises(KitError, match=msg) as e:
        pretrain(tiny_cfg(f"corpus={corpus}"))
    assert "\n" not in str(e.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("size", ["generator.size=1e12", "model.hidden_size=100000000000000",
                                  "model.max_position_embeddings=100000000"])
def test_a_model_too_big_for_memory_is_one_line_not_a_traceback(tiny_cfg, tmp_path, size):
    # petabytes: beyond any address space, so the allocation fails at once whatever the machine's overcommit; the
    # position table of 1e8 rows (51 GB) is allocated lazily, and filled this machine until the OS killed the run:
    # counted on the meta device first, each is refused before any memory is taken
    # (where the count itself cannot be made, the allocation's own failure is the line)
    with pytest.raises(ConfigError, match=r"the model \(model.hidden_size .*\) (has [\d,]+ parameters: training "
                                          r"them needs ~[\d,]+ GiB, more than this cpu's [\d,]+ GiB|does not fit in "
                                          r"memory \([\d,.]+ GiB asked for at once\)); lower model.\* or generator.\*"):
        pretrain(tiny_cfg(size, "model.num_heads=1"))
    assert not (tmp_path / "run").exists()


def test_cli_reports_user_errors_in_one_line(capsys, tmp_path):
    assert main(["pretrain", "corpus=a.txt", f"out={tmp_path}", "nope=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown config key 'nope'") and "\n" not in err
    assert main(["pretrain", f"corpus={tmp_path / 'missing.txt'}", f"out={tmp_path / 'o'}", "progress=false"]) == 2
    assert "not found" in capsys.readouterr().err


def test_mlm_objective_trains_the_same_encoder(tiny_cfg, tmp_path):
    from transformers import ElectraForMaskedLM, ElectraForSequenceClassification

    summary = pretrain(tiny_cfg("objective=mlm", "max_steps=3"))
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert "disc_loss" not in rows[-1] and rows[-1]["gen_acc"] is not None
    disc = tmp_path / "run" / "discriminator"
    assert json.loads((disc / "config.json").read_text())["architectures"] == ["ElectraModel"]
    clf = ElectraForSequenceClassification.from_pretrained(disc, num_labels=3)
    assert clf.config.hidden_size == 64 and clf.config.num_hidden_layers == 2  # the discriminator's shape
    mlm = ElectraForMaskedLM.from_pretrained(tmp_path / "run" / "generator")
    assert mlm.config.hidden_size == 64
    assert summary["encoder_parameters"] == sum(p.numel() for p in clf.electra.parameters())


def test_time_budget_and_learning_warning(tiny_cfg, tmp_path, capsys):
    from koelectra_kit.runtime import setup_logging

    setup_logging()  # the toolkit's log lines go to this test's stderr
    summary = pretrain(tiny_cfg("max_steps=0", "max_minutes=0.02", "warmup_steps=0", "warmup_ratio=0.2",
                                "plateau_check_tokens=1", "plateau_auc=1", "plateau_gen_margin=1"))
    assert summary["steps"] >= 2 and summary["elapsed_s"] >= 1.2
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert rows[-1]["lr"] < max(r["lr"] for r in rows)  # decays towards the end of the time budget
    assert all(r["on_plateau"] for r in rows)
    assert "learning? after" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["compile=true", "compile_scope=layers"]], ids=["eager", "layers-compiled"])
def test_torchrun_two_cpu_processes_hold_identical_weights(tmp_path, pretrain_tokenizer, pretrain_cache,
                                                           sample_dir, extra):
    """DDP over two processes; also with each layer compiled in place before DDP wraps the model (compile_scope).
    Each rank frees its DDP module before destroying the process group (torchrun_probe.py says why)."""
    out = tmp_path / "ddp"
    proc = torchrun(ROOT / "tests" / "torchrun_probe.py", "pretrain", "--config", TINY,
                    f"corpus={sample_dir / 'comments.txt'}", f"tokenizer={pretrain_tokenizer}",
                    f"cache_dir={pretrain_cache}", f"out={out}", "max_steps=4", "log_every=2", "save_every=2",
                    "progress=false", "plots=false", "model.hidden_dropout=0.1", *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and len(summary["rank_param_digests"]) == 2
    assert summary["ranks_in_sync"], summary["rank_param_digests"]
    assert proc.stderr.count("model: electra") == 1  # only rank 0 logs
    assert proc.stderr.count("probe: 0 DDP module(s) alive at destroy_process_group") == 2, proc.stderr[-3000:]
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [2, 4]
    assert (out / "discriminator" / "model.safetensors").exists()


def test_generator_below_unigram_is_warned_in_log_summary_and_plot(tiny_cfg, capsys):
    """Two steps at a tiny lr leave the generator below the unigram rate: the run says so, not silently."""
    import json
    from pathlib import Path

    from koelectra_kit.pretrain import pretrain

    cfg = tiny_cfg("max_steps=2", "lr=1e-9", "plots=true")
    summary = pretrain(cfg)
    assert summary["final"]["gen_acc"] < summary["final"]["gen_unigram_acc"]
    assert "below always predicting the most frequent token" in summary["warning"]
    assert "below always predicting" in capsys.readouterr().err
    assert json.loads((Path(cfg.out) / "summary.json").read_text())["warning"] == summary["warning"]


def test_push_without_network_is_one_line_after_a_complete_run(tmp_path, capsys, sample_dir, pretrain_tokenizer,
                                                                pretrain_cache):
    from koelectra_kit.cli import main

    out = tmp_path / "run"
    rc = main(["pretrain", "--config", str(TINY), f"corpus={sample_dir / 'comments.txt'}",
               f"tokenizer={pretrain_tokenizer}", f"cache_dir={pretrain_cache}", f"out={out}", "max_steps=2",
               "progress=false", "plots=false", "save_every=0", "push_to_hub=someone/tiny-electra"])
    err = capsys.readouterr().err
    assert rc == 2
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err
    # everything local is complete before the push is tried
    assert (out / "summary.json").exists() and (out / "discriminator" / "model.safetensors").exists()
    assert (out / "discriminator" / "README.md").exists()


def test_resume_on_other_data_is_refused_and_a_changed_recipe_is_named(tiny_cfg, tmp_path, sample_dir, capsys):
    """A checkpoint's data position means rows of the data it was trained on: a resume on another corpus applied it
    to other rows without a word (its epoch jumped from 0.16 to 5.93). A changed lr takes effect, and is said."""
    lines = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pretrain(tiny_cfg(f"corpus={corpus}", "max_steps=2", "save_every=2"))
    corpus.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="trained on other data"):
        pretrain(tiny_cfg(f"corpus={corpus}", "max_steps=4", "resume=true"))
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")  # the same text again: it continues
    capsys.readouterr()
    assert pretrain(tiny_cfg(f"corpus={corpus}", "max_steps=4", "resume=true", "lr=1e-4"))["steps"] == 4
    err = capsys.readouterr().err
    assert "note: resumed with lr " in err and "-> 0.0001: in effect from step 2 on" in err
    assert "note: resumed with max_steps 2 -> 4: the learning-rate schedule is a function of the budget" in err
    with pytest.raises(ConfigError, match="trained with seq_len 64 -> 32; a resume keeps"):  # the shape, not
        pretrain(tiny_cfg(f"corpus={corpus}", "max_steps=6", "resume=true", "seq_len=32"))  # "other data"
    # a refused resume left its own settings in config.yaml, the record of how the run's weights were trained
    assert "seq_len: 64" in (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8")
    pretrain(tiny_cfg(f"corpus={corpus}", "max_steps=5", "resume=true", "lr=1e-4", "vocab_size=900"))
    assert "vocab_size 2000 -> 900 has no effect on a resume" in capsys.readouterr().err


def test_a_rerun_for_another_corpus_or_tokenizer_trains_its_own_tokenizer(tmp_path, sample_dir, pretrain_cache):
    """overwrite=true (or a rerun of a run killed before its first checkpoint) with another corpus or vocab_size kept
    the first run's tokenizer in out/tokenizer, while config.yaml said otherwise."""
    from koelectra_kit.tokenizer import KoTokenizer

    out = tmp_path / "run"
    base = ["pretrain", "--config", str(TINY), f"out={out}", f"cache_dir={pretrain_cache}", "max_steps=2",
            "progress=false", "plots=false", "vocab_size=600"]
    assert main([*base, f"corpus={sample_dir / 'comments.txt'}"]) == 0
    first = KoTokenizer.from_pretrained(out / "discriminator").vocab_size
    made = (out / "tokenizer" / "tokenizer.json").stat().st_mtime_ns
    assert main([*base, f"corpus={sample_dir / 'comments.txt'}", "overwrite=true"]) == 0
    assert (out / "tokenizer" / "tokenizer.json").stat().st_mtime_ns == made  # the same request: reused
    assert main([*base, f"corpus={sample_dir / 'comments.txt'}", "overwrite=true", "vocab_size=900",
                 "presplit=none"]) == 0
    again = KoTokenizer.from_pretrained(out / "discriminator")
    assert again.vocab_size != first and again.presplit == "none"  # the first was kiwi_word


def test_a_staging_folder_a_killed_save_left_is_removed_by_the_next_save(tiny_cfg, tmp_path):
    """SIGKILL mid-save leaves checkpoints/.step-N.partial-XXXX (a model's size); the resumed run removed nothing."""
    pretrain(tiny_cfg("max_steps=2", "save_every=2"))
    stale = tmp_path / "run" / "checkpoints" / ".step-00000003.partial-abcd1234"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
    pretrain(tiny_cfg("max_steps=4", "save_every=2", "resume=true"))
    assert not stale.exists()

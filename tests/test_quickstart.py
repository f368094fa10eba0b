"""README command 1: the main job end to end on the bundled sample with the tiny presets."""
import pandas as pd

from koelectra_kit.cli import main


def test_quickstart_end_to_end(tmp_path, capsys, monkeypatch, sample_dir):
    monkeypatch.setenv("KOELECTRA_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "qs"
    rc = main(["quickstart", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    for step in ("1/4 tokenizer", "2/4 pretrain", "3/4 finetune", "4/4 label", "first 5 labelled rows"):
        assert step in printed
    # every stage's output is where the summary says, in the documented format
    assert (out / "tokenizer" / "tokenizer.json").exists()
    assert (out / "pretrain" / "discriminator" / "model.safetensors").exists()
    assert (out / "sentiment" / "eval.json").exists()
    labelled = pd.read_csv(out / "labelled.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    unlabelled = pd.read_csv(sample_dir / "reviews_unlabelled.csv", dtype=str, keep_default_na=False)
    assert len(labelled) == len(unlabelled) == 60
    assert list(labelled.columns[:4]) == list(unlabelled.columns)
    assert set(labelled["label"]) - {""} <= {"negative", "neutral", "positive"}
    # the discriminator it pretrained loads in plain transformers
    from transformers import ElectraForSequenceClassification

    ElectraForSequenceClassification.from_pretrained(out / "pretrain" / "discriminator", num_labels=3)


def test_quickstart_preset_by_name_and_stage_overrides(tmp_path, capsys, monkeypatch):
    """A shipped pretraining preset without a tokenizer preset of its name: pretraining trains the tokenizer;
    STAGE.key=value reaches each stage (here shrunk so the test takes seconds)."""
    monkeypatch.setenv("KOELECTRA_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "qs"
    argv = ["quickstart", "--out", str(out), "--preset", "cpu-30min", "pretrain.max_steps=3",
            "pretrain.max_minutes=0", "pretrain.model.hidden_size=64", "pretrain.model.num_layers=1",
            "pretrain.model.num_heads=2", "pretrain.model.intermediate_size=128", "pretrain.batch_size=8",
            "pretrain.seq_len=32", "pretrain.progress=false", "pretrain.plots=false",
            "pretrain.warmup_steps=1", "pretrain.save_every=0", "pretrain.log_every=1",
            "finetune.epochs=1", "finetune.max_length=32", "finetune.plots=false", "label.batch_size=7"]
    rc = main(argv)
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "1/3 pretrain" in printed and "tokenizer train" not in printed
    assert "label.batch_size" not in printed and "batch_size=7" in printed
    assert (out / "pretrain" / "tokenizer" / "tokenizer.json").exists()  # trained by the pretraining step
    # pretrain.resume=true continues that run: beside quickstart's own overwrite=true it was refused as a contradiction
    rc = main([*argv, "pretrain.resume=true"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "overwrite=true" not in captured.out and "resumed from" in captured.out + captured.err


def test_quickstart_bad_override_is_one_line(capsys):
    rc = main(["quickstart", "vocab_size=4000"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "STAGE.key=value" in err


def test_quickstart_refuses_overriding_the_keys_that_chain_its_stages(capsys, tmp_path):
    """label.input= was dropped (label's --input flag won: the sample was labelled, exit 0) and finetune.out= moved
    the classifier while the label step labelled the old folder (on a rerun: the previous run's model)."""
    for item, needle in (("label.input=mine.csv", "--unlabelled"), ("label.model=runs/x", "koelectra-kit label"),
                         ("label.text_column=body", "--text-column"), ("finetune.out=elsewhere", "--out"),
                         ("pretrain.out=elsewhere", "--out"), ("tokenizer.out=elsewhere", "--out")):
        rc = main(["quickstart", "--out", str(tmp_path / "qs"), item])
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (item, captured.err)
        assert item in lines[0] and needle in lines[0], lines[0]
        assert "===" not in captured.out and not (tmp_path / "qs").exists()


def test_the_preview_shows_the_models_labels_beside_a_label_column_of_the_input(tmp_path, capsys):
    """--unlabelled with a label column of its own: label writes the model's as pred_label, and the preview showed
    the input's gold labels under "first 5 labelled rows" (negative where the model had said neutral)."""
    from argparse import Namespace

    from koelectra_kit.cli.quickstart import _show

    (tmp_path / "labelled.csv").write_text(
        "review,label,pred_label,pred_confidence,pred_status\n좋아요,negative,positive,0.9,ok\n", encoding="utf-8")
    _show(Namespace(out=str(tmp_path), text_column="review", show=5), 1.0)
    table = capsys.readouterr().out.split("labelled rows of")[1].splitlines()
    assert table[1].split() == ["review", "pred_label", "pred_confidence", "pred_status"]
    assert table[2].split() == ["좋아요", "positive", "0.9", "ok"]

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

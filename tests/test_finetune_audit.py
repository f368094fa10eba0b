"""Bad input to `finetune` and `baseline` found by the fine-tuning audit: each is one `error:` line and exit 2 (or
the right answer), never a traceback, a silent wrong answer or a half-written folder."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_bad_input import assert_one_line_error, run_cli

TINY_FT = Path(__file__).resolve().parent.parent / "configs" / "finetune" / "tiny.yaml"
FAST = ("progress=false", "plots=false", "epochs=0.05", "references=false", "ensemble=none")


def _encoder_with_bin(src: Path, dst: Path, weights: bytes | None = None) -> Path:
    """``src``'s config and tokenizer with its weights as pytorch_model.bin: ``weights`` as given, or a pickle that
    holds more than tensors (a callable: torch.load(weights_only=True) refuses it)."""
    import torch
    from safetensors.torch import load_file

    dst.mkdir()
    for f in src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, dst / f.name)
    if weights is not None:
        (dst / "pytorch_model.bin").write_bytes(weights)
        return dst
    state = load_file(src / "model.safetensors")
    state["not_a_tensor"] = print  # a global weights_only does not allow
    torch.save(state, dst / "pytorch_model.bin")
    return dst


@pytest.mark.parametrize("weights", ["pickle", "truncated"])
def test_a_bin_that_safe_loading_refuses_is_one_line(capsys, tmp_path, plain_encoder_dir, sample_dir, weights):
    """A pickled pytorch_model.bin torch.load(weights_only=True) refuses (UnpicklingError), or one cut short (torch's
    zip reader: RuntimeError), was a traceback, exit 1; the pickle's read advised weights_only=False."""
    if weights == "pickle":
        model = _encoder_with_bin(plain_encoder_dir, tmp_path / "enc")
    else:
        import io

        import torch
        from safetensors.torch import load_file

        buf = io.BytesIO()
        torch.save(load_file(plain_encoder_dir / "model.safetensors"), buf)
        model = _encoder_with_bin(plain_encoder_dir, tmp_path / "enc", buf.getvalue()[:2000])
    out = tmp_path / "o"
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={model}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", *FAST)
    assert_one_line_error(rc, err, f"model={model}")
    assert "weights_only=False" not in err
    assert not out.exists() and not list(tmp_path.glob(".o.partial-*"))


@pytest.mark.parametrize("rating", [("rating_column=stars", "rating_map=stars5"), ("rating_map=stars5",)])
def test_a_label_column_and_a_rating_both_given_is_one_line(capsys, tmp_path, rating):
    """label_column= with rating_column=/rating_map=: the label column was read and the ratings asked for did nothing,
    exit 0 (labels the user meant to replace with the ratings were trained on)."""
    import pandas as pd

    train = tmp_path / "both.csv"
    pd.DataFrame({"review": ["좋아요", "별로예요", "그냥 그래요"] * 4, "label": ["positive"] * 12,
                  "stars": [5, 1, 3] * 4}).to_csv(train, index=False)
    rc, _, err = run_cli(capsys, "baseline", "--train", train, "label_column=label", *rating)
    assert_one_line_error(rc, err, "label_column=label", "rating_map=stars5", "label_column=null")
    rc, printed, err = run_cli(capsys, "baseline", "--train", train, "label_column=null", *rating, "plots=false")
    assert rc == 0 and "labels from rating column 'stars'" in printed, err


def test_a_parquet_label_column_of_whole_numbers_with_a_gap_reads_as_its_numbers(capsys, tmp_path):
    """pandas writes an int label column with one missing cell as float: its 1 was read as '1.0', so labels=[0,1]
    matched no row ('no usable rows' with drop_unknown_labels=true, every row an unknown '1.0' or '0.0' without)."""
    import pandas as pd

    train = tmp_path / "train.parquet"
    pd.DataFrame({"review": ["정말 좋아요", "최악이에요", "괜찮아요", "별로예요"] * 5 + ["라벨 없음"],
                  "label": [1, 0, 1, 0] * 5 + [None]}).to_parquet(train)
    rc, printed, err = run_cli(capsys, "baseline", "--train", train, "labels=[0,1]", "drop_unknown_labels=true",
                               "plots=false")
    assert rc == 0, err
    assert "kept 20 rows: 0 10, 1 10" in printed and "dropped 1 rows: unknown label values {'': 1}" in printed


def test_label_map_of_yes_and_no_maps_a_files_yes_and_no(capsys, tmp_path):
    """YAML reads label_map={yes: positive, no: negative} with the keys true and false: a file's yes/no matched
    neither, and the error told the user to map them with label_map=, which they had."""
    import pandas as pd

    train = tmp_path / "yn.csv"
    pd.DataFrame({"review": ["정말 좋아요", "최악이에요", "괜찮아요", "별로예요"] * 5,
                  "label": ["yes", "no", "Yes", "NO"] * 5}).to_csv(train, index=False)
    rc, printed, err = run_cli(capsys, "baseline", "--train", train, "label_map={yes: positive, no: negative}",
                               "labels=[negative,positive]", "plots=false")
    assert rc == 0, err
    assert "kept 20 rows: negative 10, positive 10" in printed


def test_baseline_refuses_an_out_that_holds_its_train_file(capsys, tmp_path, sample_dir):
    """baseline's out= is swapped in whole: a train.csv kept beside an earlier eval.json was deleted with the old
    folder, exit 0 (only an input named like a file baseline writes was refused)."""
    out = tmp_path / "old"
    out.mkdir()
    (out / "eval.json").write_text("{}", encoding="utf-8")
    shutil.copy(sample_dir / "reviews_labelled.csv", out / "train.csv")
    rc, _, err = run_cli(capsys, "baseline", "--train", out / "train.csv", "--out", out, "plots=false")
    assert_one_line_error(rc, err, f"train={out / 'train.csv'}", "would be replaced")
    assert sorted(p.name for p in out.iterdir()) == ["eval.json", "train.csv"]


def test_ratings_written_as_text_say_so_not_fix_the_bands(tmp_path):
    """A rating column of "5점"-style values was refused with "fit no band ... fix the bands in rating_map=", which
    sent the analyst to bands that were right: the values are not numbers."""
    from koelectra_kit.errors import InputError
    from koelectra_kit.io.labelled import read_labelled

    path = tmp_path / "r.csv"
    path.write_text("review,stars\n좋아요 최고,5점\n별로,1점\n그냥,3\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"ratings are not numbers .*'5점' as 5") as e:
        read_labelled(path, ["negative", "neutral", "positive"], rating_map="stars5")
    assert "fix the bands" not in str(e.value)

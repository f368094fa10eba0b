"""Label names as files spell them, read by the one resolver (``io.labelled.label_resolver``) everywhere: a macOS
file's decomposed Korean (NFD) is the same label, a whole number '4.0' is the label 4, the 긍정/pos aliases are
offered only where they apply, and ``evaluate`` reads a file with the label_map the model was trained with."""
from __future__ import annotations

import json
import unicodedata

import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.config import load_config
from koelectra_kit.errors import ConfigError, InputError
from koelectra_kit.finetune import FinetuneConfig, load_splits, read_labelled
from koelectra_kit.io.labelled import format_file_report

pytestmark = pytest.mark.fast

EMO = ["기쁨", "슬픔", "분노"]
L3 = ["negative", "neutral", "positive"]


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def cfg_for(**kw) -> FinetuneConfig:
    return load_config(FinetuneConfig, None, [f"{k}={v}" for k, v in kw.items()])


# --- Unicode form ---------------------------------------------------------------------------------------------------

def test_a_decomposed_label_in_a_file_is_the_same_label(tmp_path):
    """A file saved on macOS (NFD) against labels typed elsewhere (NFC): was "'기쁨' is not in the label set
    ['기쁨', ...]", two strings that print alike."""
    f = write(tmp_path / "a.csv", f"text,label\n좋다,{nfd('기쁨')}\n슬프다,슬픔\n화난다,{nfd('분노')}\n또 좋다,기쁨\n")
    got = read_labelled(f, EMO)
    assert got.y.tolist() == [0, 1, 2, 0]
    assert got.report["labels_decomposed"] == {"기쁨": 1, "분노": 1}
    said = format_file_report(got.report)
    assert "decomposed (Unicode NFD" in said and "label names mapped" not in said  # not "'기쁨' -> '기쁨'"


def test_a_label_set_with_one_name_in_two_unicode_forms_is_refused(tmp_path):
    """labels= built from a file that mixes both forms trained two classes of one label (prob_기쁨 twice)."""
    with pytest.raises(ConfigError) as e:
        cfg_for(labels=f"[기쁨,{nfd('기쁨')},슬픔]")
    msg = str(e.value)
    assert f"'기쁨' and '{nfd('기쁨')}'" in msg and "NFC/NFD" in msg and "give each label once" in msg
    with pytest.raises(ConfigError, match="'Pos' and 'pos' are one label"):
        cfg_for(labels="[Pos,pos,neg]")


def test_labels_typed_decomposed_are_the_model_names_composed(tmp_path):
    cfg = cfg_for(labels=f"[{nfd('기쁨')},슬픔]")
    assert cfg.labels == ["기쁨", "슬픔"] and all(unicodedata.is_normalized("NFC", x) for x in cfg.labels)


def test_label_map_keys_in_either_form_and_one_value_mapped_twice(tmp_path):
    f = write(tmp_path / "a.csv", f"text,label\n좋다,{nfd('좋음')}\n싫다,싫음\n")
    got = read_labelled(f, ["negative", "positive"], label_map={"좋음": "positive", nfd("싫음"): "negative"})
    assert got.y.tolist() == [1, 0]
    with pytest.raises(ConfigError, match="one file value"):  # {1: a, '1': b}: the last one won, unsaid
        read_labelled(f, ["negative", "positive"], label_map={1: "negative", "1": "positive"})


def test_human_labels_and_the_app_log_read_either_form(tmp_path):
    from koelectra_kit.io.labellog import parse
    from koelectra_kit.label.human import read_human_labels

    table = write(tmp_path / "mine.csv", f"review,label\n좋다,{nfd('기쁨')}\n슬프다,{nfd('슬픔')}\n")
    assert sorted(read_human_labels(table, EMO).labels.values()) == ["기쁨", "슬픔"]
    events = parse(f"text,label,action\n좋다,{nfd('기쁨')},answer\n".encode(), "LABELS.csv", EMO)
    assert events[0].label == "기쁨"


def test_suggest_reads_labelled_files_in_either_form(tmp_path):
    from koelectra_kit.suggest.file import _answered

    path = write(tmp_path / "done.csv", f"review,label\n좋다,{nfd('기쁨')}\n슬프다,슬픔\n")
    records = [type("R", (), {"error": None, "fields": row, "line": i})()
               for i, row in enumerate([["좋다", nfd("기쁨")], ["슬프다", "슬픔"]], 2)]
    got = _answered(lambda: (None, iter(records)), ["review", "label"], "review", ["좋다", "슬프다"], str(path), EMO)
    assert got == ["좋다", "슬프다"]


# --- aliases offered where they apply -------------------------------------------------------------------------------

def test_the_alias_hint_is_offered_only_where_the_aliases_apply(tmp_path):
    from koelectra_kit.label.human import read_human_labels

    table = write(tmp_path / "mine.csv", "review,label\n좋다,긍정\n")
    with pytest.raises(InputError) as e:
        read_human_labels(table, EMO)  # 긍정 is no label of an emotion model
    assert "긍정" in str(e.value) and "pos/neg" not in str(e.value) and "(or " not in str(e.value)
    bad = write(tmp_path / "bad.csv", "review,label\n좋다,posi\n")
    with pytest.raises(InputError) as e:
        read_human_labels(bad, L3)
    assert str(e.value).endswith("(or 긍정/부정/중립, pos/neg/neu)")
    with pytest.raises(InputError) as e:
        read_human_labels(bad, ["negative", "positive", "기타"])
    assert str(e.value).endswith("(or 긍정/부정, pos/neg)")


# --- whole numbers --------------------------------------------------------------------------------------------------

def test_a_whole_number_written_as_a_float_is_the_integer_label(tmp_path):
    """A CSV of 1-5 that pandas wrote as floats (a gap in the column): "not in the label set ['1', ...]: '5.0'"."""
    f = write(tmp_path / "a.csv", "text,label\n좋다,5.0\n별로,1.0\n그냥,3\n")
    assert read_labelled(f, ["1", "2", "3", "4", "5"]).y.tolist() == [4, 0, 2]
    assert read_labelled(f, ["1.0", "2.0", "3.0", "4.0", "5.0"]).y.tolist() == [4, 0, 2]  # and the other way
    with pytest.raises(InputError):
        read_labelled(write(tmp_path / "b.csv", "text,label\n좋다,05\n"), ["1", "5"])  # a code, not the number 5
    from koelectra_kit.label.human import read_human_labels

    table = write(tmp_path / "mine.csv", "review,label\n좋다,5.0\n")
    assert list(read_human_labels(table, ["1", "2", "3", "4", "5"]).labels.values()) == ["5"]


# --- messages -------------------------------------------------------------------------------------------------------

def test_a_dev_file_without_a_class_names_the_stratified_split(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\n" + "".join(f"글{i},{lab}\n" for i in range(4) for lab in L3))
    dev = write(tmp_path / "d.csv", "text,label\n다른1,negative\n다른2,positive\n")
    with pytest.raises(InputError, match="leave out dev= for a stratified split of train"):
        load_splits(cfg_for(train=train, dev=dev))


def test_default_labels_on_a_two_class_file_name_the_labels_to_give(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\n" + "".join(f"글{i},{lab}\n" for i in range(4)
                                                           for lab in ("긍정", "부정")))
    with pytest.raises(InputError) as e:
        load_splits(cfg_for(train=train))
    assert "the default [negative,neutral,positive]" in str(e.value) and "labels=[negative,positive]" in str(e.value)


def test_a_file_of_its_own_labels_names_the_labels_setting(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\n" + "".join(f"글{i},{i % 5 + 1}.0\n" for i in range(10)))
    with pytest.raises(InputError, match=r"give labels=\[1,2,3,4,5\]"):
        load_splits(cfg_for(train=train))


def test_null_in_a_label_list_says_to_quote_it():
    with pytest.raises(ConfigError, match="quote the word"):
        cfg_for(labels="[null,hate]")


# --- evaluate and the model's training label_map --------------------------------------------------------------------

@pytest.fixture(scope="module")
def coded(tmp_path_factory, sample_dir):
    """A TF-IDF folder trained on 0/1 codes with label_map={1: negative, 0: positive} (the usual reading flipped),
    and a dev file in the same codes."""
    root = tmp_path_factory.mktemp("coded")
    df = pd.read_csv(sample_dir / "reviews_labelled.csv")
    df = df[df.label != "neutral"].assign(label=lambda d: (d.label == "negative").astype(int))
    dev = pd.concat([g.iloc[:8] for _, g in df.groupby("label")])
    df.drop(dev.index).to_csv(root / "train.csv", index=False)
    dev.to_csv(root / "dev.csv", index=False)
    out = root / "tfidf"
    assert main(["baseline", f"train={root / 'train.csv'}", f"dev={root / 'dev.csv'}", f"out={out}",
                 "labels=[negative,positive]", "label_map={1: negative, 0: positive}", "baseline.min_df=1",
                 "plots=false"]) == 0
    return out, root / "dev.csv"


def test_evaluate_reads_a_file_with_the_models_training_label_map(coded, tmp_path, capfd):
    model, dev = coded
    capfd.readouterr()
    assert main(["evaluate", "--model", str(model), "--data", str(dev), "--out", str(tmp_path / "e")]) == 0
    err = capfd.readouterr().err
    assert "note:" in err and "{1: negative, 0: positive}" in err and "baseline_config.yaml" in err
    got = json.loads((tmp_path / "e" / "eval.json").read_text())["dev"]["macro_f1"]
    assert got == pytest.approx(json.loads((model / "eval.json").read_text())["dev"]["macro_f1"])
    # the usual 0=negative typed again: used as given, with a warning naming both
    assert main(["evaluate", "--model", str(model), "--data", str(dev), "--label-map", "0=negative",
                 "--label-map", "1=positive", "--no-plots"]) == 0
    err = capfd.readouterr().err
    assert "warning: label_map {0: negative, 1: positive} is not the one" in err
    assert "{1: negative, 0: positive}" in err and "0 -> negative (trained: positive)" in err

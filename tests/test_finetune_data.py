"""Fine-tuning data handling without a model: columns, label and rating mapping, bad input (clear
errors with counts and examples, nothing dropped silently), formats and encodings, the stratified
split and subsample, length-grouped batches, layer-wise lr groups, head alignment."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from koelectra_kit.config import load_config
from koelectra_kit.errors import ConfigError, InputError
from koelectra_kit.finetune import (
    FinetuneConfig,
    collate,
    label_resolver,
    length_grouped_batches,
    load_splits,
    param_groups,
    parse_rating_map,
    read_labelled,
    stratified_split,
    stratified_subsample,
)

L3 = ["negative", "neutral", "positive"]


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def cfg_for(**kw) -> FinetuneConfig:
    return load_config(FinetuneConfig, None, [f"{k}={v}" for k, v in kw.items()])


# --- columns and labels --------------------------------------------------------------------------

def test_sample_file_reads_with_auto_columns(sample_dir):
    d = read_labelled(sample_dir / "reviews_labelled.csv", L3)
    assert len(d.texts) == 450
    assert d.report["text_column"] == "review"
    assert d.report["class_counts"] == {"negative": 158, "neutral": 112, "positive": 180}
    assert any("\n" in t for t in d.texts)  # quoted multi-line fields survive
    assert d.report["dropped"] == {}


def test_unknown_column_lists_columns_present(tmp_path):
    f = write(tmp_path / "a.csv", "texto,label\n좋아요,positive\n")
    with pytest.raises(InputError, match="columns present: texto, label"):
        read_labelled(f, L3)
    with pytest.raises(InputError, match=r"no column 'texte'.*columns present: texto, label"):
        read_labelled(f, L3, text_column="texte")
    g = write(tmp_path / "b.csv", "review,stars\n좋아요,5\n")
    with pytest.raises(InputError, match="no label column.*rating_column.*columns present: review, stars"):
        read_labelled(g, L3)


def test_the_text_column_can_not_be_the_label_column(tmp_path):
    """text_column=label (meant: label_column=) read each label as its own review: a model learns to read it back
    and scores 1.0 on dev, exit 0."""
    f = write(tmp_path / "a.csv", "review,label,stars\n좋아요,positive,5\n별로,negative,1\n그냥,neutral,3\n")
    with pytest.raises(InputError, match="column 'label' is both the text and the label column"):
        read_labelled(f, L3, text_column="label")
    with pytest.raises(InputError, match="column 'stars' is both the text and the rating column"):
        read_labelled(f, L3, text_column="stars", rating_map="stars5")


def test_a_column_name_the_header_repeats_is_not_picked(tmp_path):
    """pandas renames a repeated name ('label', 'label' -> 'label', 'label.1'): the first of two label columns (an old
    and a corrected one) was trained on without a word, and of two 'review' columns the first, empty one made
    "no usable rows". A repeat of a column nobody reads, and a name like 'label.1' written so, are fine."""
    for header, name in (("review,label,label", "label"), ("review,review,label", "review")):
        f = write(tmp_path / "a.csv", f"{header}\n좋아요,positive,negative\n별로,negative,negative\n")
        with pytest.raises(InputError, match=f"the header names 2 columns '{name}'"):
            read_labelled(f, L3)
    ok = write(tmp_path / "b.tsv", "review\tmemo\tmemo\tlabel.1\tlabel\n좋아요\ta\tb\tnegative\tpositive\n")
    assert read_labelled(ok, L3).y.tolist() == [2]


def test_two_columns_that_match_a_name_but_for_case_or_spaces_are_an_error_naming_both(tmp_path):
    """'Label' and 'label ' both match 'label' ignoring case and surrounding spaces: the last was trained on without
    a word. A column spelled exactly as the name still wins over one that differs in case or spaces."""
    f = write(tmp_path / "a.csv", "review,Label,label \n좋아요,positive,negative\n별로,negative,positive\n")
    with pytest.raises(InputError, match="columns 'Label', 'label ' both read as 'label'"):
        read_labelled(f, L3)
    ok = write(tmp_path / "b.csv", "review,Label,label\n좋아요,negative,positive\n별로,positive,negative\n")
    assert read_labelled(ok, L3).y.tolist() == [2, 0]
    one = write(tmp_path / "c.csv", "Review ,LABEL\n좋아요,positive\n")
    assert read_labelled(one, L3).texts == ["좋아요"]


def test_empty_texts_dropped_counted_and_reported(tmp_path):
    f = write(tmp_path / "a.csv", "review,label\n좋아요,positive\n,negative\n   ,neutral\n별로,negative\n")
    d = read_labelled(f, L3)
    assert d.texts == ["좋아요", "별로"]
    assert d.rows.tolist() == [1, 4]
    assert d.report["dropped"]["empty_text"] == {"count": 2, "rows": [2, 3]}
    assert d.report["rows_read"] == 4 and d.report["rows_kept"] == 2


INVISIBLE = ["\u200b", "\u200c\u200d", " \u2060 ", "\ufeff\u200b"]  # zero-width space, joiners, word joiner, BOM


def test_texts_of_only_invisible_characters_are_empty_texts(tmp_path):
    """A text of zero-width characters alone was no empty text: trained on as a text (which the normalizer made an
    empty string). It is dropped and counted as an empty one, as `label` flags it empty (the same is_blank)."""
    lines = "".join(f"{t},positive\n" for t in INVISIBLE)
    f = write(tmp_path / "a.csv", f"review,label\n좋아요,positive\n{lines}별로\u200b,negative\n그냥,neutral\n")
    d = read_labelled(f, L3)
    assert d.texts == ["좋아요", "별로\u200b", "그냥"]
    assert d.report["dropped"]["empty_text"] == {"count": 4, "rows": [2, 3, 4, 5]}


def test_the_apps_label_log_reads_as_its_latest_answers(tmp_path):
    """The app's LABELS.csv as a training file (finetune train=LABELS.csv, evaluate, baseline): an answer the analyst
    changed or undid is not trained on (row by row it was), a skip is no label, and the report says so."""
    from koelectra_kit.io.labelled import format_file_report

    log = write(tmp_path / "LABELS.csv", "text,label,action,row,source,answer_id,undoes,time\n"
                "배송 빨라요 최고,positive,answer,1,teach,a1,,\n"
                "별로예요 다신 안 사요,positive,answer,2,teach,a2,,\n"
                "별로예요 다신 안 사요,부정,answer,2,teach,a3,,\n"  # changed: the latest answer wins
                "그냥 그래요,neutral,answer,3,teach,a4,,\n"
                ",,undo,,teach,u1,a4,\n"  # retracts a4
                "애매하네,,skip,4,teach,a5,,\n"
                "완전 좋아요,positive,answer,5,teach,a6,,\n")
    d = read_labelled(log, L3)
    assert dict(zip(d.texts, [L3[i] for i in d.y])) == {"배송 빨라요 최고": "positive", "별로예요 다신 안 사요": "negative",
                                                         "완전 좋아요": "positive"}
    assert d.report["label_log"] == {"events": 7, "labels": 3, "skipped": 1}
    assert "the app's label log: 7 lines give 3 labels" in format_file_report(d.report)
    bad = write(tmp_path / "bad.csv", "text,label,action\n좋아,great,answer\n")
    with pytest.raises(InputError, match="line 2: label 'great'.*map them with label_map="):
        read_labelled(bad, L3)
    assert read_labelled(bad, L3, label_map={"great": "positive"}).y.tolist() == [2]  # label_map applies to a log
    with pytest.raises(InputError, match="holds no answer"):
        read_labelled(write(tmp_path / "skips.csv", "text,label,action\n좋아,,skip\n"), L3)


LOG = ("\ufefftext,label,action,row,source,answer_id,undoes,time\n"
       "배송 빨라요 최고,positive,answer,1,teach,a1,,2025-01-02T10:11:12\n"
       "별로예요 다신 안 사요,부정,answer,2,teach,a2,,2025-01-02T10:11:13\n"
       "애매하네,,skip,3,teach,a3,,2025-01-02T10:11:15\n").encode()
TORN = {  # the app killed while it appended a fourth answer: the line cut off where it was
    "label cut": "좋아요,posi".encode(),
    "text cut inside a quote": '"배송이 빨라요,\n그리고 포장'.encode(),  # the csv reader would read on to the end
    "character cut in two": "좋아요,부정".encode()[:-1],
    "undo cut short": ",,undo,,teach,u9,a".encode(),  # read as it is: an undo that retracts nothing
}


@pytest.mark.parametrize("tail", TORN.values(), ids=TORN.keys())
def test_the_apps_label_log_torn_mid_write_is_read_without_its_last_line(tmp_path, tail):
    """finetune train=LABELS.csv as `label --human-labels` reads it: the answer the app never confirmed is left out
    (the app sets the line aside; the page sends it again), said in one warning the CLI prints as one `warning:`
    line, and the file is only read. It was a refused label, a CSV parse error or a UTF-8 error, or read unsaid."""
    import warnings

    import koelectra_kit

    log = tmp_path / "LABELS.csv"
    log.write_bytes(LOG + tail)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        d = read_labelled(log, L3)
    assert dict(zip(d.texts, [L3[i] for i in d.y])) == {"배송 빨라요 최고": "positive", "별로예요 다신 안 사요": "negative"}
    assert d.report["label_log"] == {"events": 3, "labels": 2, "skipped": 1} and d.report["encoding"] == "utf-8-sig"
    assert len(said) == 1 and str(said[0].message).startswith(f"{log}: line 5 was cut off mid-write (no line end, ")
    assert str(said[0].message).endswith("read without it (the file is left as it is)")
    assert said[0].filename.startswith(str(Path(koelectra_kit.__file__).parent))  # the CLI's one-line format
    assert log.read_bytes() == LOG + tail and [p.name for p in tmp_path.iterdir()] == ["LABELS.csv"]


@pytest.mark.parametrize("tail", ["좋아요,positive", "좋아요,긍정", "좋아요,positive,answer,4,teach,a4,,2025-01-02T10:11:20"])
def test_the_apps_label_log_whose_last_line_lacks_a_line_end_reads_it_as_an_answer(tmp_path, recwarn, tail):
    log = write(tmp_path / "LABELS.csv", LOG.decode("utf-8") + tail)
    d = read_labelled(log, L3)
    assert dict(zip(d.texts, [L3[i] for i in d.y]))["좋아요"] == "positive" and len(d.texts) == 3
    assert not recwarn.list


@pytest.mark.parametrize("tail", ["좋아요,posi\n", "좋아요,posi,answer,4,teach,a4,,2025-01-02T10:11:20"])
def test_a_wrong_label_on_a_complete_last_line_of_the_log_is_still_refused(tmp_path, tail):
    log = write(tmp_path / "LABELS.csv", LOG.decode("utf-8") + tail)
    with pytest.raises(InputError, match="line 5: label 'posi'.*map them with label_map="):
        read_labelled(log, L3)


def test_a_csv_that_is_no_label_log_reads_its_unterminated_last_row_as_ever(tmp_path):
    """Only the app's log (text, label and action columns) is read without a torn line: any other table's last row
    with a label outside the set stays its error (or drop_unknown_labels' to drop)."""
    f = write(tmp_path / "train.csv", "text,label,note\n좋아요,positive,x\n별로,negative,y\n그냥,posi")
    with pytest.raises(InputError, match="1 rows' labels are not in the label set.*'posi'"):
        read_labelled(f, L3)
    assert read_labelled(f, L3, drop_unknown_labels=True).texts == ["좋아요", "별로"]


def test_a_file_label_wrote_is_read_with_a_warning(tmp_path):
    """Its label column is a model's predictions: read as asked (pseudo-labels can be meant), said on one line."""
    f = write(tmp_path / "out.csv", "review,label,confidence,status\n좋아요,positive,0.9,ok\n별로,negative,0.8,ok\n")
    with pytest.warns(UserWarning, match="is a file `koelectra-kit label` wrote: its label column is a model's"):
        d = read_labelled(f, L3)
    assert d.texts == ["좋아요", "별로"]
    twice = write(tmp_path / "twice.csv", "review,label,confidence,status,pred_label,pred_confidence,pred_status\n"
                  "좋아요,positive,0.9,ok,positive,0.8,ok\n별로,negative,0.8,ok,neutral,0.5,ok\n")
    with pytest.warns(UserWarning, match="is a file `koelectra-kit label` wrote"):  # labelled twice: label is
        read_labelled(twice, L3)  # the first model's predictions


def test_labels_outside_the_set_error_with_counts_and_examples_or_drop(tmp_path):
    f = write(tmp_path / "a.csv", "review,label\n좋아요,positive\n최악,negatve\n별로,negatve\n음,??\n그냥,neutral\n")
    with pytest.raises(InputError) as e:
        read_labelled(f, L3)
    msg = str(e.value)
    assert "3 rows" in msg and "'negatve' (2 rows)" in msg and "'??' (1 rows)" in msg
    assert "row 2: '최악'" in msg and "drop_unknown_labels=true" in msg and "label_map" in msg
    d = read_labelled(f, L3, drop_unknown_labels=True)
    assert d.texts == ["좋아요", "그냥"]
    assert d.report["dropped"]["unknown_label"] == {"count": 3, "values": {"negatve": 2, "??": 1}, "rows": [2, 3, 4]}


def test_label_names_map_onto_the_label_set(tmp_path):
    f = write(tmp_path / "a.csv", "text,sentiment\n좋아요,긍정\n별로,부정\n그냥,중립\n최고,Positive \n")
    d = read_labelled(f, L3)
    assert d.y.tolist() == [2, 0, 1, 2]
    assert d.report["label_mapping"] == {"Positive": "positive", "긍정": "positive", "부정": "negative", "중립": "neutral"}
    from koelectra_kit.io.labelled import format_file_report

    # the model predicts the mapped names: the report says how to keep the file's own (긍정 in the label files)
    assert "labels= with the file's own names keeps those" in format_file_report(d.report)
    # ... and the other way: a Korean label set reads English file labels
    g = write(tmp_path / "b.csv", "review,label\n좋아요,positive\n별로,neg\n")
    assert read_labelled(g, ["부정", "긍정"]).y.tolist() == [1, 0]
    # explicit map for numeric labels (NSMC's 0/1)
    h = write(tmp_path / "c.csv", "review,label\n좋아요,1\n별로,0\n")
    assert read_labelled(h, ["negative", "positive"], label_map={0: "negative", 1: "positive"}).y.tolist() == [1, 0]
    with pytest.raises(ConfigError, match="not one of the labels"):
        read_labelled(h, ["negative", "positive"], label_map={"1": "good"})


def test_label_map_values_read_as_numbers_map_onto_a_numeric_label_set(tmp_path):
    """YAML reads label_map={pos: 1} with an int 1: labels=[0,1] (strings) was refused with "'1' is not in labels
    ['0', '1']"; {0:negative} (no space) is one key with no label, shown as "-> 'None'"."""
    f = write(tmp_path / "a.csv", "review,label\n좋아요,pos\n별로,neg\n")
    cfg = cfg_for(train=f, labels="[0,1]", label_map="{pos: 1, neg: 0}")
    assert read_labelled(f, cfg.labels, label_map=cfg.label_map).y.tolist() == [1, 0]
    with pytest.raises(ConfigError, match=r"'0:negative' maps to no label.*label_map=\{0: negative\}"):
        cfg_for(train=f, labels="[negative,positive]", label_map="{0:negative}")
    with pytest.raises(ConfigError, match="'0:negative' maps to no label"):
        read_labelled(f, ["negative", "positive"], label_map={"0:negative": None})


def test_class_with_no_examples_is_an_error(tmp_path):
    f = write(tmp_path / "a.csv", "review,label\n" + "좋아요,positive\n别로,negative\n" * 5)
    with pytest.raises(InputError, match="no examples of 'neutral'.*negative 5, neutral 0, positive 5"):
        load_splits(cfg_for(train=f))
    # a binary label set is fine
    s = load_splits(cfg_for(train=f, labels="[negative,positive]"))
    assert len(s.train.y) + len(s.dev.y) == 10


def test_a_single_example_and_a_header_only_file_are_said_plainly(tmp_path):
    """"'negative', 'positive' has a single example" (one verb for several labels), and a header with no rows under
    it was "no usable rows (0 empty texts, 0 unknown labels out of 0)"."""
    f = write(tmp_path / "a.csv", "review,label\n좋아요,positive\n별로,negative\n그냥,neutral\n보통,neutral\n")
    with pytest.raises(InputError, match="'negative', 'positive' each have a single example, so the dev split"):
        load_splits(cfg_for(train=f))
    g = write(tmp_path / "b.csv", "review,label\n좋아요,positive\n별로,negative\n싫어,negative\n그냥,neutral\n"
                                  "보통,neutral\n")
    with pytest.raises(InputError, match="'positive' has a single example"):
        load_splits(cfg_for(train=g))
    for name, text in (("h.csv", "review,label\n"), ("h.tsv", "review\tlabel\r\n")):
        with pytest.raises(InputError, match=f"{name}: the file has no rows under its header$"):
            read_labelled(write(tmp_path / name, text), L3)


def test_config_validation():
    with pytest.raises(ConfigError, match="at least 2 labels"):
        cfg_for(labels="[positive]")
    with pytest.raises(ConfigError, match="distinct"):
        cfg_for(labels="[a,a]")
    with pytest.raises(ConfigError, match="label_map"):
        cfg_for(label_map="{0: good}")
    for bad in (1.5, 0.999, 0, -0.1):  # 0.999 trained on one row per class and reported a score
        with pytest.raises(ConfigError, match="dev_fraction"):
            cfg_for(dev_fraction=bad)
    assert cfg_for(dev_fraction=0.5).dev_fraction == 0.5
    with pytest.raises(ConfigError, match="unknown config key 'lr_decay'"):
        cfg_for(lr_decay=0.8)


def test_old_key_grad_clip_still_works_and_presets_load_by_name():
    assert cfg_for(grad_clip=0.5).max_grad_norm == 0.5
    with pytest.raises(ConfigError, match="both 'grad_clip' and its new name 'max_grad_norm'"):
        cfg_for(grad_clip=0.5, max_grad_norm=0.5)
    tiny = load_config(FinetuneConfig, "tiny", [])  # a shipped preset by name, as --config tiny
    assert tiny.max_length == 64 and tiny.max_grad_norm == 1.0


# --- ratings ---------------------------------------------------------------------------------------

def test_rating_presets_and_bands(tmp_path):
    assert parse_rating_map("stars5") == [(1, 2, "negative"), (3, 3, "neutral"), (4, 5, "positive")]
    assert parse_rating_map("nsmc10")[1] == (5, 8, "neutral")
    assert parse_rating_map("0-2.5:bad, 3-5:good") == [(0, 2.5, "bad"), (3, 5, "good")]
    for bad, msg in [("1-2 negative", "can't read band"), ("1-3:a,3-5:b", "overlap"), ("5-1:a", "below")]:
        with pytest.raises(ConfigError, match=msg):
            parse_rating_map(bad)
    f = write(tmp_path / "a.csv", "review,stars\n최악,1\n별로,2\n그냥,3\n좋아,4\n최고,5\n")
    d = read_labelled(f, L3, rating_map="stars5")
    assert d.y.tolist() == [0, 0, 1, 2, 2]
    assert "rating column 'stars' via stars5" in d.report["label_source"]
    k = read_labelled(f, ["부정", "중립", "긍정"], rating_map="stars5")  # preset names map onto Korean labels
    assert k.y.tolist() == [0, 0, 1, 2, 2]


def test_rating_fitting_no_band_is_an_error(tmp_path):
    f = write(tmp_path / "a.tsv", "id\tdocument\trating\n1\t최악\t1\n2\t그냥\t11\n3\t???\t\n4\t음\tten\n5\t최고\t10\n")
    with pytest.raises(InputError) as e:
        read_labelled(f, L3, rating_map="nsmc10")
    msg = str(e.value)
    assert "3 rows' ratings fit no band" in msg and "'11' (1 rows)" in msg and "'ten' (1 rows)" in msg
    d = read_labelled(f, L3, rating_map="nsmc10", drop_unknown_labels=True)
    assert d.y.tolist() == [0, 2] and d.report["dropped"]["unknown_label"]["count"] == 3
    with pytest.raises(ConfigError, match="needs rating_map"):
        read_labelled(f, L3, rating_column="rating")


def test_a_rating_in_a_band_whose_label_is_not_in_the_set_is_said_so(tmp_path):
    """stars5 with labels=[negative,positive]: the 3s are in the band '3:neutral', and the error said they "fit no
    band", sending the analyst to bands that were right."""
    f = write(tmp_path / "a.csv", "review,stars\n최악,1\n그냥,3\n음,3\n최고,5\n")
    with pytest.raises(InputError, match=r"2 rows' ratings fall in a band of rating_map 'stars5' whose label is not in "
                                         r"the label set \['negative', 'positive'\] \('neutral': 2 rows\)"):
        read_labelled(f, ["negative", "positive"], rating_map="stars5")
    assert read_labelled(f, ["negative", "positive"], rating_map="stars5", drop_unknown_labels=True).y.tolist() == [0, 1]


def test_unknown_label_values_are_cut_short_in_the_error(tmp_path):
    """label_column= naming a review column printed six whole reviews (20,000 characters each) in the one line."""
    long = "정말 " * 5000
    f = write(tmp_path / "a.csv", f"title,review\n좋아,{long}\n별로,{long}x\n")
    with pytest.raises(InputError) as e:
        read_labelled(f, L3, text_column="title", label_column="review")
    assert len(str(e.value)) < 1000 and "2 rows' labels are not in the label set" in str(e.value)


# --- formats and encodings -------------------------------------------------------------------------

def test_formats_and_encodings(tmp_path):
    rows = [("정말 좋아요", "positive"), ("별로예요, 비추", "negative"), ("그저 그래요", "neutral")]
    csv_text = "review,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in rows)
    for name, enc in [("utf8.csv", "utf-8"), ("bom.csv", "utf-8-sig"), ("cp949.csv", "cp949"), ("euckr.csv", "euc-kr")]:
        d = read_labelled(write(tmp_path / name, csv_text, enc), L3)
        assert d.texts == [t for t, _ in rows], name
    # TSV without quoting (NSMC style): a stray double quote must not swallow the next rows
    tsv = write(tmp_path / "a.tsv", 'document\tlabel\n"따옴표 하나\tpositive\n다음 줄\tnegative\n끝"\tneutral\n')
    assert read_labelled(tsv, L3).texts == ['"따옴표 하나', "다음 줄", '끝"']
    jl = tmp_path / "a.jsonl"
    jl.write_text("".join(json.dumps({"text": t, "label": lab}, ensure_ascii=False) + "\n" for t, lab in rows),
                  encoding="utf-8")
    assert read_labelled(jl, L3).y.tolist() == [2, 0, 1]
    import pandas as pd

    pq = tmp_path / "a.parquet"
    pd.DataFrame({"review": [t for t, _ in rows], "rating": [5, 1, 3]}).to_parquet(pq)
    assert read_labelled(pq, L3, rating_map="stars5").y.tolist() == [2, 0, 1]


def test_unreadable_encoding_is_a_clear_error(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_bytes(b"review,label\n\xff\xfe\xfa\xfb,positive\n")
    with pytest.raises(InputError, match="not UTF-8 or cp949"):
        read_labelled(f, L3)


# --- split and subsample ---------------------------------------------------------------------------

def test_stratified_split_is_seeded_and_keeps_proportions():
    y = np.array([0] * 170 + [1] * 300 + [2] * 530)
    tr, dv = stratified_split(y, 0.1, seed=1)
    assert len(set(tr) | set(dv)) == 1000 and not set(tr) & set(dv)
    assert np.bincount(y[dv]).tolist() == [17, 30, 53]
    assert np.array_equal(dv, stratified_split(y, 0.1, seed=1)[1])
    assert not np.array_equal(dv, stratified_split(y, 0.1, seed=2)[1])
    tiny = np.array([0, 0, 1, 1, 1, 2, 2])  # every class still gets a dev row, and keeps a train row
    tr, dv = stratified_split(tiny, 0.1, seed=0)
    assert sorted(tiny[dv].tolist()) == [0, 1, 2] and sorted(set(tiny[tr].tolist())) == [0, 1, 2]


def test_stratified_subsample():
    y = np.array([0] * 170 + [1] * 300 + [2] * 530)
    idx = stratified_subsample(y, 100, seed=0)
    assert len(idx) == 100 and len(set(idx)) == 100
    assert np.bincount(y[idx]).tolist() == [17, 30, 53]
    rare = np.array([0] * 998 + [1] * 2)
    assert np.bincount(rare[stratified_subsample(rare, 10, seed=0)]).tolist() == [9, 1]
    # two classes under a row's share each keep one, paid for by the largest: 4 asked were 5 (3 + 1 + 1), and the
    # report said 4
    two_rare = np.array([0] * 1000 + [1] * 10 + [2] * 10)
    assert np.bincount(two_rare[stratified_subsample(two_rare, 4, seed=0)]).tolist() == [2, 1, 1]


def test_dev_split_and_subsample_reported(sample_dir):
    s = load_splits(cfg_for(train=sample_dir / "reviews_labelled.csv", max_train_rows=100, seed=7))
    assert len(s.train.y) == 100 and len(s.dev.y) == 45
    assert "stratified 0.1" in s.report["dev_source"] and "seed 7" in s.report["dev_source"]
    assert s.report["train_subsample"].startswith("100 of 405")
    assert not set(s.train.rows) & set(s.dev.rows)


def test_the_same_text_with_different_labels_is_a_warning_in_the_data_report(tmp_path, sample_dir):
    """A review labelled twice, differently, was trained on without a word. The report says so in one line (count, an
    example); which rows train does not change."""
    from koelectra_kit.finetune import format_data_report

    f = write(tmp_path / "a.csv", "review,label\n좋아요,positive\n별로,negative\n그냥,neutral\n좋아요 ,negative\n"
                                  "별로,negative\n최악,negative\n최악,neutral\n괜찮아,positive\n")
    d = read_labelled(f, L3)
    assert len(d.texts) == 8 and d.y.tolist() == [2, 0, 1, 0, 0, 0, 1, 2]
    dev = write(tmp_path / "d.csv", "review,label\n정말 좋다,positive\n싫다,negative\n보통,neutral\n")
    s = load_splits(cfg_for(train=f, dev=dev))
    warning = [line for line in format_data_report(s.report).splitlines() if "different labels" in line]
    assert warning[0].strip() == ("warning: 2 texts have different labels in different rows (e.g. '좋아요': positive "
                                  "in row 1, negative in row 4); each row is kept with its own label")
    assert len(s.train.y) == 8
    clean = read_labelled(sample_dir / "reviews_labelled.csv", L3)  # repeats with one label are no warning
    assert "conflicting_labels" not in clean.report


# --- batching and optimizer groups ---------------------------------------------------------------

def test_length_grouped_batches_cover_everything_with_less_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 120, size=2000)
    batches = length_grouped_batches(lengths, 32, np.random.default_rng(1))
    allidx = np.concatenate(batches)
    assert sorted(allidx.tolist()) == list(range(2000))
    assert lengths[batches[0]].max() == lengths.max()  # longest batch first
    padded = sum(len(b) * lengths[b].max() for b in batches)
    perm = np.random.default_rng(1).permutation(2000)
    naive = sum(len(b) * lengths[b].max() for b in np.array_split(perm, len(batches)))
    assert padded < 0.7 * naive
    again = length_grouped_batches(lengths, 32, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


def test_collate_pads_to_the_longest():
    ids = [[2, 5, 3], [2, 7, 8, 9, 3], [2, 3]]
    input_ids, mask = collate(ids, [0, 1, 2], pad_id=0)
    assert input_ids.tolist() == [[2, 5, 3, 0, 0], [2, 7, 8, 9, 3], [2, 3, 0, 0, 0]]
    assert mask.sum(1).tolist() == [3, 5, 2]
    assert collate(ids, [0, 2], pad_id=0, multiple=8)[0].shape == (2, 8)


def _tiny_classifier(labels):
    import torch
    from transformers import ElectraConfig, ElectraForSequenceClassification

    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=50, hidden_size=16, embedding_size=8, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=32, num_labels=len(labels), id2label=dict(enumerate(labels)),
                        label2id={lab: i for i, lab in enumerate(labels)})
    return ElectraForSequenceClassification(cfg)


def test_layerwise_lr_decay_groups():
    model = _tiny_classifier(L3)
    groups = param_groups(model, lr=1e-3, layer_decay=0.5, weight_decay=0.01)
    by_name = {}
    for g in groups:
        for p in g["params"]:
            by_name[id(p)] = g
    named = dict(model.named_parameters())
    lr = lambda n: by_name[id(named[n])]["lr"]  # noqa: E731
    assert lr("classifier.out_proj.weight") == pytest.approx(1e-3)
    assert lr("electra.encoder.layer.2.output.dense.weight") == pytest.approx(0.5e-3)
    assert lr("electra.encoder.layer.0.output.dense.weight") == pytest.approx(0.125e-3)
    assert lr("electra.embeddings.word_embeddings.weight") == pytest.approx(0.0625e-3)
    assert lr("electra.embeddings_project.weight") == pytest.approx(0.0625e-3)
    assert by_name[id(named["electra.encoder.layer.1.output.LayerNorm.weight"])]["weight_decay"] == 0.0
    assert by_name[id(named["electra.encoder.layer.1.output.dense.weight"])]["weight_decay"] == 0.01
    assert sum(len(g["params"]) for g in groups) == len(named)


def test_refinetuning_with_reordered_labels_keeps_their_meaning(tmp_path):
    """HF loads a same-shaped head whatever its names mean; we permute rows to the new order."""
    import torch

    from koelectra_kit.finetune import load_model

    src = _tiny_classifier(["negative", "neutral", "positive"])
    with torch.no_grad():
        src.classifier.out_proj.bias.copy_(torch.tensor([1.0, 2.0, 3.0]))
    src.save_pretrained(tmp_path / "src")
    x = torch.tensor([[1, 5, 9, 2]])
    before = src.eval()(input_ids=x).logits[0]
    cfg = cfg_for(model=tmp_path / "src", labels="[positive,negative,neutral]")
    model, notes = load_model(cfg, cfg.labels)
    assert "reordered" in notes[0]
    after = model.eval()(input_ids=x).logits[0]
    torch.testing.assert_close(after, before[[2, 0, 1]])
    assert model.config.id2label == {0: "positive", 1: "negative", 2: "neutral"}
    # other names, same count: the old head must not be reused
    cfg = cfg_for(model=tmp_path / "src", labels="[a,b,c]")
    model, notes = load_model(cfg, cfg.labels)
    assert "new classification head" in notes[0]
    assert not torch.allclose(model.classifier.out_proj.bias, torch.tensor([1.0, 2.0, 3.0]))


def test_label_resolver_prefers_explicit_map():
    r = label_resolver(L3, {"neutral": "positive"})
    assert r("neutral") == "positive" and r("NEG") == "negative" and r("x") is None


def test_token_cache_skips_kiwi_the_second_time_and_misses_on_any_change(sample_tokenizer, tmp_path):
    from koelectra_kit.finetune import encode_texts

    calls = []
    real = sample_tokenizer.encode_batch

    def counting(texts, **kw):
        calls.append(len(texts))
        return real(texts, **kw)

    texts = ["영화 너무 재밌어요 ㅋㅋ", "별로...", "배우 연기가 좋았다", "이게 뭐야"]
    plain = encode_texts(sample_tokenizer, texts, 16)
    sample_tokenizer.encode_batch = counting
    try:
        first = encode_texts(sample_tokenizer, texts, 16, cache_dir=tmp_path)
        assert calls == [4] and list(tmp_path.glob("finetune-ids/*/state.json"))
        second = encode_texts(sample_tokenizer, texts, 16, cache_dir=tmp_path)
        assert calls == [4]  # read back, no tokenization
        for got in (first, second):
            assert got[0] == plain[0] and got[1].tolist() == plain[1].tolist()
        encode_texts(sample_tokenizer, texts, 8, cache_dir=tmp_path)  # another max_length
        encode_texts(sample_tokenizer, texts[:3] + ["이게 뭐야!"], 16, cache_dir=tmp_path)  # one text edited
        assert calls == [4, 4, 4]
        assert not list(tmp_path.glob("finetune-ids/*.tmp*"))  # no temporary entries left behind
        for arrow in tmp_path.glob("finetune-ids/*/*.arrow"):  # a damaged cache is recomputed, not trusted
            arrow.write_bytes(b"not arrow")
        assert encode_texts(sample_tokenizer, texts, 16, cache_dir=tmp_path)[0] == plain[0]
        assert calls == [4, 4, 4, 4]
    finally:
        del sample_tokenizer.encode_batch


@pytest.mark.parametrize("saved", ["bfloat16", "float16"])
def test_a_half_precision_checkpoint_fine_tunes_from_fp32_weights(tmp_path, saved):
    """Hub uploads are often saved in bf16/fp16, and transformers loads them as saved: fine-tuning would step
    AdamW on half-precision weights (updates of ~1e-5 vanish) and `label --precision fp32` would not be fp32."""
    import torch

    from koelectra_kit.finetune import load_model

    src = _tiny_classifier(["negative", "neutral", "positive"]).to(getattr(torch, saved))
    src.save_pretrained(tmp_path / "src")
    cfg = cfg_for(model=tmp_path / "src", labels="[negative,neutral,positive]")
    model, _ = load_model(cfg, cfg.labels)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    # the same weights, widened exactly
    torch.testing.assert_close(model.electra.embeddings.word_embeddings.weight,
                               src.electra.embeddings.word_embeddings.weight.float(), rtol=0, atol=0)


def test_a_half_precision_classifier_labels_in_the_precision_asked_for(tmp_path, tiny_classifier_dir):
    import shutil

    import torch
    from transformers import ElectraForSequenceClassification

    from koelectra_kit.classify.classifier import Classifier

    half = tmp_path / "half"
    shutil.copytree(tiny_classifier_dir, half)
    ElectraForSequenceClassification.from_pretrained(tiny_classifier_dir).to(torch.float16).save_pretrained(half)
    clf = Classifier.load(half, device="cpu", precision="fp32")
    assert {p.dtype for p in clf.model.parameters()} == {torch.float32} and clf.dtype is None
    assert len(clf.predict(["배송 빠르고 좋아요", "별로"]).labels) == 2


def test_a_dev_file_whose_every_text_is_in_train_is_refused(tmp_path, sample_dir):
    """dev= the training file (or a copy) only warned: the scores were training scores and the checkpoint kept was
    the most overfit one. Refused; a dev file sharing some texts with train still warns and trains."""
    train = sample_dir / "reviews_labelled.csv"
    with pytest.raises(InputError, match="every dev text is also in train"):
        load_splits(cfg_for(train=train, dev=train))
    copy = tmp_path / "copy.csv"
    copy.write_bytes(train.read_bytes())
    with pytest.raises(InputError, match="held-out rows"):
        load_splits(cfg_for(train=train, dev=copy))
    lines = train.read_text(encoding="utf-8").splitlines()
    write(tmp_path / "dev.csv", "\n".join([lines[0], *lines[1:40]]) + "\n")
    write(tmp_path / "train.csv", "\n".join([lines[0], *lines[20:]]) + "\n")
    s = load_splits(cfg_for(train=tmp_path / "train.csv", dev=tmp_path / "dev.csv"))
    assert 0 < s.report["dev_texts_also_in_train"] < len(s.dev.y)


def test_finetuning_a_generator_warns_and_a_discriminator_does_not(tiny_run):
    """`finetune model=RUN/generator` (or a published -generator checkpoint) trained the small masked-LM half of the
    pair without a word; `pretrain init=` already refuses that slip."""
    from koelectra_kit.finetune import load_model

    cfg = cfg_for(model=tiny_run / "generator")
    _, notes = load_model(cfg, cfg.labels)
    assert any("is an ELECTRA generator (ElectraForMaskedLM)" in n for n in notes), notes
    cfg = cfg_for(model=tiny_run / "discriminator")
    _, notes = load_model(cfg, cfg.labels)
    assert not any("generator" in n for n in notes), notes

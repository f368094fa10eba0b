"""The leftovers of the option fuzz audit (tests/test_options_fuzz_commands.py, test_options_fuzz_pretrain.py): each
test is a command line that was accepted, or refused without naming the option, before its fix."""
from __future__ import annotations

import warnings

import pytest

from tests.test_bad_input import assert_one_line_error, run_cli

pytestmark = pytest.mark.fast


# ---------------------------------------------------------------------------------------------
# suggest out=: a missing folder was made, where label's --output refuses it
# ---------------------------------------------------------------------------------------------


def test_suggest_out_in_a_missing_folder_is_refused_as_label_refuses_it(capsys, tmp_path, tfidf_dir, sample_dir):
    """out=runs/nxt/next.csv (a typo for runs/next/) wrote into a new folder nxt/, exit 0."""
    pool = sample_dir / "reviews_unlabelled.csv"
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}",
                         f"out={tmp_path / 'a' / 'b' / 'n.csv'}")
    assert_one_line_error(rc, err, "out=", "does not exist; create it first")
    rc, _, err = run_cli(capsys, "label", "--model", tfidf_dir, "--input", pool, "--output", tmp_path / "a" / "o.csv")
    assert_one_line_error(rc, err, "does not exist; create it first")  # the rule it follows
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a").mkdir()
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={tmp_path / 'a' / 'n.csv'}",
                         "n=3")
    assert rc == 0, err
    assert (tmp_path / "a" / "n.csv").is_file()


# ---------------------------------------------------------------------------------------------
# app --dev: a file without its label (or text) column was found only by the first retrain
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header, needle", [("review,score", "no label column"), ("id,label", "no text column")])
def test_app_dev_without_its_columns_is_refused_at_start(capsys, tmp_path, monkeypatch, tfidf_dir, header, needle):
    import koelectra_kit.app as app

    monkeypatch.setattr(app, "serve", lambda settings: pytest.fail("served with a dev file it cannot use"))
    dev = tmp_path / "dev.csv"
    dev.write_text(f"{header}\n좋아요,5\n", encoding="utf-8")
    pool = tmp_path / "pool.csv"
    pool.write_text("review\n배송 빨라요\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "app", "--model", tfidf_dir, "--teach", pool, "--labels",
                         tmp_path / "labels.csv", "--dev", dev)
    assert_one_line_error(rc, err, f"--dev {dev}", needle, "columns present: " + header.replace(",", ", "))


def test_app_dev_with_the_usual_columns_starts(capsys, tmp_path, monkeypatch, tfidf_dir):
    import koelectra_kit.app as app

    served = []
    monkeypatch.setattr(app, "serve", served.append)
    dev = tmp_path / "dev.tsv"
    dev.write_text("텍스트\tsentiment\n좋아요\tpositive\n", encoding="utf-8")  # any of the names finetune reads
    pool = tmp_path / "pool.csv"
    pool.write_text("review\n배송 빨라요\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "app", "--model", tfidf_dir, "--teach", pool, "--labels",
                         tmp_path / "labels.csv", "--dev", dev)
    assert rc == 0 and len(served) == 1, err


# ---------------------------------------------------------------------------------------------
# evaluate --label-map: an empty name on either side of '='
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair, side", [("=negative", "file value before"), (" =negative", "file value before"),
                                        ("0=", "label after"), ("0= ", "label after")])
def test_evaluate_label_map_with_an_empty_side_is_refused(capsys, pair, side):
    """--label-map =negative ("$VALUE=negative", the variable unset) scored every row with an empty label cell as
    negative, exit 0; 0= was refused as a label_map error that did not name the flag."""
    rc, _, err = run_cli(capsys, "evaluate", "--model", "m", "--data", "d.csv", "--label-map", "1=positive",
                         "--label-map", pair)
    assert_one_line_error(rc, err, f"--label-map {pair!r}", side, "is empty")


def test_evaluate_label_map_giving_one_value_two_labels_is_refused(capsys):
    """--label-map 0=negative --label-map 0=positive scored with the last one, exit 0: a typo in either unseen."""
    rc, _, err = run_cli(capsys, "evaluate", "--model", "m", "--data", "d.csv", "--label-map", "0=negative",
                         "--label-map", "1=positive", "--label-map", " 0 =positive")
    assert_one_line_error(rc, err, "--label-map", "'0' is given twice", "'negative'", "'positive'")


def test_a_label_map_target_may_be_spelled_as_a_files_labels_are():
    """A file's NEGATIVE or 부정 cells are read as negative; the same word after '=' was refused."""
    from koelectra_kit.errors import ConfigError
    from koelectra_kit.io.labelled import checked_label_map

    labels = ["negative", "neutral", "positive"]
    assert checked_label_map({0: "NEGATIVE", 1: "중립", "2": " Positive "}, labels) == \
        {"0": "negative", "1": "neutral", "2": "positive"}
    with pytest.raises(ConfigError, match="'posi' is not one of the labels"):
        checked_label_map({"2": "posi"}, labels)


# ---------------------------------------------------------------------------------------------
# cache_dir=: a file there was "Not a directory (FILE/presplit)", naming neither the option nor what it must be
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("below", [False, True], ids=["the file", "a folder under it"])
def test_tokenizer_cache_dir_that_is_a_file_names_the_option(capsys, tmp_path, sample_dir, below):
    afile = tmp_path / "cache"
    afile.write_text("x\n", encoding="utf-8")
    given = afile / "sub" if below else afile
    for argv in (["tokenizer", "train", f"input={sample_dir / 'comments.txt'}", f"out={tmp_path / 'tok'}",
                  "vocab_size=500"],
                 ["tokenizer", "words", f"tokenizer={tmp_path / 'tok'}", f"input={sample_dir / 'comments.txt'}"]):
        rc, _, err = run_cli(capsys, *argv, f"cache_dir={given}")
        assert_one_line_error(rc, err, f"cache_dir={given}", "must be a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_cache_dir_given_empty_is_refused(capsys, tmp_path, sample_dir):
    rc, _, err = run_cli(capsys, "tokenizer", "train", f"input={sample_dir / 'comments.txt'}",
                         f"out={tmp_path / 'tok'}", "cache_dir=")
    assert_one_line_error(rc, err, "cache_dir=''", "is empty")


def test_prepare_cache_dir_that_is_a_file_names_the_option(capsys, tmp_path, sample_dir, sample_tokenizer_dir):
    """The one cache-folder rule says it for every command that takes cache_dir= (prepare, pretrain, finetune,
    distill), where the cache is first resolved."""
    from koelectra_kit.errors import InputError
    from koelectra_kit.io.fileio import cache_dir

    afile = tmp_path / "cache"
    afile.write_text("x\n", encoding="utf-8")
    with pytest.raises(InputError, match="cache_dir=.* is a file, and cache_dir must be a folder"):
        cache_dir(afile)
    rc, _, err = run_cli(capsys, "prepare", "--config", "tiny", f"corpus={sample_dir / 'comments.txt'}",
                         f"tokenizer={sample_tokenizer_dir}", f"out={tmp_path / 'prep'}", f"cache_dir={afile}",
                         "progress=false")
    assert_one_line_error(rc, err, f"cache_dir={afile} is a file", "must be a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


# ---------------------------------------------------------------------------------------------
# tokenizer vocab_size too small: "raise vocab_size or lower limit_alphabet" said neither by how much, and was
# wrong where the corpus, not vocab_size, ran out of merges
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, needle", [("FILE", "is a file"), ("", "is empty")], ids=["a file", "empty"])
def test_pretrain_cache_dir_is_checked_with_the_config(capsys, tmp_path, value, needle):
    """pretrain checks it with its other keys (--print-config does nothing else): before, a file was found after the
    run had trained its tokenizer, and an empty value read as the default cache."""
    afile = tmp_path / "cache"
    afile.write_text("x\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "pretrain", "--config", "tiny", "corpus=a.txt", f"out={tmp_path / 'run'}",
                         f"cache_dir={afile if value == 'FILE' else value}", "--print-config")
    assert_one_line_error(rc, err, "cache_dir=", needle)


def _train_warnings(tmp_path, corpus, vocab_size: int) -> list[str]:
    from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_tokenizer(TokenizerConfig(input=[str(corpus)], out=str(tmp_path / f"t{vocab_size}"),
                                        vocab_size=vocab_size, presplit="none", progress=False,
                                        cache_dir=str(tmp_path / "c")))
    return [str(w.message) for w in caught if "nearly all single characters" in str(w.message)]


def test_few_merges_warning_says_what_vocab_size_to_use(tmp_path, sample_dir):
    # the sample's 817 kept characters and their ## forms take 1,439 tokens of a 1,000-token request: no merges
    said, = _train_warnings(tmp_path, sample_dir / "comments.txt", 1000)
    assert "817-character alphabet" in said and "take 1439" in said
    assert "1.4x the vocab_size=1000 asked for" in said  # a floor under the alphabet, not a cap: said by how much
    assert "give vocab_size=3000 or more" in said and "limit_alphabet below 817" in said


def test_few_merges_warning_blames_the_corpus_when_it_ran_out_of_pairs(tmp_path):
    (tmp_path / "one.txt").write_text("abc\n", encoding="utf-8")
    said, = _train_warnings(tmp_path, tmp_path / "one.txt", 1000)
    assert "too few repeated character pairs" in said and "bigger corpus" in said
    assert "give vocab_size" not in said  # a bigger vocab_size changes nothing there

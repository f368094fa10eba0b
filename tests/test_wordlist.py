"""A tokenizer folder's word list (``tokenizer words``, tokenizer/wordlist.py): the files it names encode with Kiwi's
ids where kiwipiepy is not installed (a GPU machine fed a prepared folder), a word it lacks is one line there, and
the list travels with saved models without changing any fingerprint."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.tokenizer import KoTokenizer, tokenizer_fingerprint
from koelectra_kit.tokenizer.wordlist import FILE

ROOT = Path(__file__).resolve().parent.parent
NO_KIWI = "import sys; sys.modules['kiwipiepy'] = None; sys.modules['kiwipiepy_model'] = None\n"


def _no_kiwi(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    """A koelectra-kit command (or ``code``) in a process where kiwipiepy cannot be imported."""
    run = (NO_KIWI + code) if code is not None else \
        (NO_KIWI + f"from koelectra_kit.cli import main; raise SystemExit(main({list(args)!r}))")
    return subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _one_line(done, *needles: str) -> str:
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip() and not ln.startswith(("labelling", "\r"))]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def tok_dir(sample_tokenizer_dir, tmp_path) -> Path:
    """A copy of the session's kiwi_word tokenizer (a list written into the shared one would reach other tests)."""
    return Path(shutil.copytree(sample_tokenizer_dir, tmp_path / "tok"))


def _reviews(sample_dir: Path, name: str) -> list[str]:
    return pd.read_csv(sample_dir / name)["review"].fillna("").astype(str).tolist()


def test_the_files_words_give_kiwis_ids_without_kiwipiepy(tok_dir, sample_dir, capsys):
    data = sample_dir / "reviews_unlabelled.csv"
    assert main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={data}", "progress=false"]) == 0
    out = capsys.readouterr().out
    assert FILE in out and "words added" in out
    texts = _reviews(sample_dir, "reviews_unlabelled.csv")
    with_kiwi = KoTokenizer.from_pretrained(tok_dir).encode_batch(texts)["input_ids"]
    done = _no_kiwi(code=f"""
import json
from koelectra_kit.tokenizer import KoTokenizer
tok = KoTokenizer.from_pretrained({str(tok_dir)!r})
print(json.dumps(tok.encode_batch(json.loads({json.dumps(texts)!r}))["input_ids"]))
assert sys.modules['kiwipiepy'] is None  # never imported for real
""")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == with_kiwi
    # a second run reads the same texts: nothing new, the list's bytes unchanged
    before = (tok_dir / FILE).read_bytes()
    assert main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={data}", "progress=false"]) == 0
    assert capsys.readouterr().out.startswith("0 words added")
    assert (tok_dir / FILE).read_bytes() == before
    # a word list is a set: a file named twice (here also as ./) is read once, not refused as counting double
    twice = f"input=[{data},{data.parent}/./{data.name}]"
    assert main(["tokenizer", "words", f"tokenizer={tok_dir}", twice, "progress=false"]) == 0
    assert capsys.readouterr().out.startswith("0 words added")


def test_a_word_not_in_the_list_is_one_line_naming_it_and_the_command(tok_dir, sample_tokenizer_dir, sample_dir):
    main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={sample_dir / 'reviews_unlabelled.csv'}",
          "progress=false"])
    done = _no_kiwi("tokenizer", "encode", "--tokenizer", str(tok_dir), "듣도보도못한낱말이다")
    _one_line(done, "kiwipiepy is not installed", "1 word is not in", str(tok_dir / FILE), "'듣도보도못한낱말이다'",
              f"koelectra-kit tokenizer words tokenizer={tok_dir} input=FILE")
    done = _no_kiwi("tokenizer", "encode", "--tokenizer", str(sample_tokenizer_dir), "영화 재밌었는데")
    _one_line(done, "kiwipiepy is not installed", "presplit kiwi_word", "pip install kiwipiepy")


def test_a_model_fine_tuned_and_labelling_without_kiwipiepy(tok_dir, sample_dir, tmp_path, monkeypatch, capsys):
    """The lease's path: the encoder's tokenizer has the words of the training and labelling files, so the
    fine-tune and the labelling run with kiwipiepy unimportable (in this process: the module blocked and the Kiwi
    already loaded here out of reach), and the labels are those a machine with Kiwi gives."""
    from koelectra_kit.tokenizer import kiwi

    from .fixtures_finetune import TINY_CONFIG, save_encoder

    train, unlabelled = sample_dir / "reviews_labelled.csv", sample_dir / "reviews_unlabelled.csv"
    assert main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input=[{train},{unlabelled}]",
                 "progress=false"]) == 0
    encoder = save_encoder(KoTokenizer.from_pretrained(tok_dir), tmp_path / "enc", hidden=32, max_positions=64)
    assert (encoder / FILE).read_bytes() == (tok_dir / FILE).read_bytes()
    label = ["label", "--model", str(tmp_path / "ft"), "--input", str(unlabelled), "--no-progress", "--output"]
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "kiwipiepy", None)
        m.setattr(kiwi, "_KIWI", {})
        assert main(["finetune", "--config", str(TINY_CONFIG), f"model={encoder}", f"train={train}",
                     f"out={tmp_path / 'ft'}", "precision=fp32", "progress=false", "epochs=1", "min_steps=1",
                     "references=false", "ensemble=none", "plots=false", f"cache_dir={tmp_path / 'cache'}"]) == 0
        assert main([*label, str(tmp_path / "a.csv")]) == 0
        # a file with words the list lacks: one line, no output
        new = tmp_path / "new.csv"
        new.write_text("review\n좋아요\n듣도보도못한낱말이다\n", encoding="utf-8")
        capsys.readouterr()
        assert main([*label[:4], str(new), "--no-progress", "--output", str(tmp_path / "c.csv")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: kiwipiepy is not installed") and "'듣도보도못한낱말이다'" in err, err
        assert not (tmp_path / "c.csv").exists()
        assert kiwi._KIWI == {}  # no Kiwi was made
    assert main([*label, str(tmp_path / "b.csv")]) == 0  # Kiwi back
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_the_list_travels_with_saves_and_leaves_the_fingerprint(tok_dir, sample_tokenizer_dir, sample_dir, tmp_path):
    plain = KoTokenizer.from_pretrained(sample_tokenizer_dir)
    main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={sample_dir / 'reviews_unlabelled.csv'}",
          "progress=false"])
    listed = KoTokenizer.from_pretrained(tok_dir)
    assert tokenizer_fingerprint(listed) == tokenizer_fingerprint(plain)  # no id depends on it
    listed.save(tmp_path / "model")
    assert (tmp_path / "model" / FILE).read_bytes() == (tok_dir / FILE).read_bytes()
    plain.save(tmp_path / "model")  # another tokenizer saved over it: the list was the previous one's
    assert not (tmp_path / "model" / FILE).exists()
    listed.save(tok_dir)  # saved where it was loaded from: kept
    assert (tok_dir / FILE).is_file()


@pytest.mark.parametrize("presplit, kept", [("kiwi_word", True), ("none", False)])
def test_a_tokenizer_trained_again_into_its_folder_says_so_and_keeps_the_list_it_can_read(tok_dir, sample_dir, capsys,
                                                                                         presplit, kept):
    """The retrain replaced the folder silently and its word list with it (what lets a machine without Kiwi encode
    those files): Kiwi's cuts do not depend on the vocabulary, so a kiwi_word tokenizer keeps it."""
    main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={sample_dir / 'reviews_unlabelled.csv'}",
          "progress=false"])
    words = (tok_dir / FILE).read_bytes()
    capsys.readouterr()
    assert main(["tokenizer", "train", "--config", "tiny", f"input={sample_dir / 'comments.txt'}", f"out={tok_dir}",
                 f"presplit={presplit}", "vocab_size=2100", "progress=false"]) == 0
    err = capsys.readouterr().err
    assert f"note: replaced the tokenizer that was in {tok_dir}" in err
    assert (tok_dir / FILE).is_file() == kept and (not kept or (tok_dir / FILE).read_bytes() == words)
    assert ("is kept" if kept else "and its word list") in err
    if kept:  # the new tokenizer reads it
        assert KoTokenizer.from_pretrained(tok_dir).encode("배송 빨라요")


def test_a_list_made_by_another_kiwi_or_damaged_is_one_line(tok_dir, sample_dir):
    main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={sample_dir / 'reviews_unlabelled.csv'}",
          "progress=false"])
    path = tok_dir / FILE
    head, _, body = path.read_text(encoding="utf-8").partition("\n")
    path.write_text('#kiwi_words\t{"kiwipiepy": "0.1.0", "kiwipiepy_model": "0.1.0"}\n' + body, encoding="utf-8")
    with pytest.raises(InputError, match="made with Kiwi .*0.1.0.*tokenizer words"):
        KoTokenizer.from_pretrained(tok_dir).encode_batch(["영화 재밌었는데"])
    path.write_text(head + "\n" + body + "낱말\t9,x\n", encoding="utf-8")
    with pytest.raises(InputError, match="cannot read the word list .*line"):
        KoTokenizer.from_pretrained(tok_dir).encode_batch(["영화 재밌었는데"])


def test_what_a_word_list_cannot_serve_is_refused(tok_dir, plain_encoder_dir, sample_dir, capsys):
    data = sample_dir / "reviews_unlabelled.csv"

    def refused(*args, needle):
        assert main(["tokenizer", "words", *args, "progress=false"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and needle in err and err.count("\n") == 1, err

    refused(f"input={data}", needle="tokenizer is not set")
    refused(f"tokenizer={tok_dir}", needle="input is empty")
    refused(f"tokenizer={tok_dir}", f"input={tok_dir / 'nothere.csv'}", needle="not found")
    refused(f"tokenizer={plain_encoder_dir}", f"input={data}", needle="presplit none")
    settings = json.loads((tok_dir / "koelectra_tokenizer.json").read_text(encoding="utf-8"))
    settings["kiwi"] = {"kiwipiepy": "0.1.0", "kiwipiepy_model": "0.1.0"}
    (tok_dir / "koelectra_tokenizer.json").write_text(json.dumps(settings), encoding="utf-8")
    refused(f"tokenizer={tok_dir}", f"input={data}", needle="was saved with Kiwi")
    assert not (tok_dir / FILE).exists()


def test_two_runs_adding_to_one_list_at_once_keep_each_others_words(tok_dir, sample_dir):
    """`tokenizer words` on the train file and on the file to label, started together on one folder: the one that
    writes last keeps the words the other wrote after it read the list (they were lost: a word missing there is
    found only on the machine without Kiwi)."""
    from koelectra_kit.tokenizer.wordlist import add_words, load

    unlabelled = sample_dir / "reviews_unlabelled.csv"

    def texts():  # the other run writes its list after this one has read the (still missing) list
        assert main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={unlabelled}", "progress=false"]) == 0
        yield from _reviews(sample_dir, "reviews_labelled.csv")

    tok = KoTokenizer.from_pretrained(tok_dir)
    added, total = add_words(tok, texts())
    words = load(tok_dir)
    assert total == len(words) > added
    for text in _reviews(sample_dir, "reviews_unlabelled.csv") + _reviews(sample_dir, "reviews_labelled.csv"):
        assert all(w in words for w in tok.normalize(text).split()), text


def test_a_list_its_error_says_to_make_again_is_made_again_by_tokenizer_words(tok_dir, sample_dir, capsys):
    """An empty (or damaged) list, or one another Kiwi made, is refused where it is read with 'make it again with
    `koelectra-kit tokenizer words ...`'; that command refused it with the same line, so the advice led nowhere. It
    now makes the list again from the files it is given, with a warning, and the list serves them."""
    data = sample_dir / "reviews_unlabelled.csv"
    path = tok_dir / FILE
    for damaged in ("", '#kiwi_words\t{"kiwipiepy": "0.1.0", "kiwipiepy_model": "0.1.0"}\n낱말\t\n'):
        path.write_text(damaged, encoding="utf-8")
        with pytest.raises(InputError, match="make it again with `koelectra-kit tokenizer words"):
            KoTokenizer.from_pretrained(tok_dir).encode_batch(["영화 재밌었는데"])
        capsys.readouterr()
        assert main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={data}", "progress=false"]) == 0
        captured = capsys.readouterr()
        assert "made again" in captured.err and "words added" in captured.out, captured
        tok = KoTokenizer.from_pretrained(tok_dir)
        from koelectra_kit.tokenizer.wordlist import load

        words = load(tok_dir, tok.saved_kiwi)
        assert "낱말" not in words
        assert all(w in words for t in _reviews(sample_dir, "reviews_unlabelled.csv") for w in tok.normalize(t).split())


def test_a_list_of_cuts_another_word_cuts_made_is_refused(tok_dir, sample_dir, monkeypatch):
    """The per-user word file goes unread once wordfile.FORMAT is raised (word_cuts cuts differently); the word list
    kept no format, so it went on serving the old cuts: other ids than Kiwi's, silently, on the machine without Kiwi.
    A list from before the format was written counts as format 1."""
    from koelectra_kit.tokenizer import wordfile

    main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={sample_dir / 'reviews_unlabelled.csv'}",
          "progress=false"])
    texts = _reviews(sample_dir, "reviews_unlabelled.csv")
    ids = KoTokenizer.from_pretrained(tok_dir).encode_batch(texts)["input_ids"]
    path = tok_dir / FILE
    head, _, body = path.read_text(encoding="utf-8").partition("\n")
    versions = json.loads(head.split("\t", 1)[1])
    versions.pop("format", None)
    path.write_text("#kiwi_words\t" + json.dumps(versions) + "\n" + body, encoding="utf-8")  # as first written
    assert KoTokenizer.from_pretrained(tok_dir).encode_batch(texts)["input_ids"] == ids
    monkeypatch.setattr(wordfile, "FORMAT", wordfile.FORMAT + 1)
    with pytest.raises(InputError, match="cuts of format 1, .*make it again"):
        KoTokenizer.from_pretrained(tok_dir).encode_batch(texts)


def _reviews_workbook(sample_dir: Path, path: Path) -> Path:
    """The sample reviews as a workbook, with the cells a sheet holds that a CSV does not: numbers that Excel keeps
    as floats (3.0, which `label` reads as '3') and an empty cell."""
    from koelectra_kit.io.workbook import write_xlsx

    texts = _reviews(sample_dir, "reviews_unlabelled.csv")[:20]
    rows = [[i, t] for i, t in enumerate(texts, 1)] + [[21, 3.0], [22, 12345], [23, None], [24, "배송 빨라요"]]
    write_xlsx(path, ["id", "review"], rows)
    return path


def test_a_workbooks_words_let_label_read_it_without_kiwipiepy(tiny_classifier_dir, sample_dir, tmp_path,
                                                               monkeypatch, capsys):
    """`label` reads an .xlsx; `tokenizer words` refused one (save it as CSV), so the file `label` was to read on the
    machine without Kiwi had no words in the list. The workbook is read as `label` reads it: the labels there are
    those Kiwi gives, and the sheet's temporary copy is gone."""
    from koelectra_kit.tokenizer import kiwi

    model = Path(shutil.copytree(tiny_classifier_dir, tmp_path / "clf"))  # its list must not reach other tests
    book = _reviews_workbook(sample_dir, tmp_path / "reviews.xlsx")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    assert main(["tokenizer", "words", f"tokenizer={model}", f"input=[{book}]", "text_column=review",
                 "progress=false"]) == 0
    assert "words added" in capsys.readouterr().out
    assert list(temp.iterdir()) == []
    words = (model / FILE).read_text(encoding="utf-8")
    assert "\n3\t" in words and "\n12345\t" in words  # the cells as `label` reads them ('3', not '3.0')
    label = ["label", "--model", str(model), "--input", str(book), "--no-progress", "--output"]
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "kiwipiepy", None)
        m.setattr(kiwi, "_KIWI", {})
        assert main([*label, str(tmp_path / "a.csv")]) == 0, capsys.readouterr().err
        assert kiwi._KIWI == {}  # no Kiwi was made
    assert main([*label, str(tmp_path / "b.csv")]) == 0  # Kiwi back
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert len(pd.read_csv(tmp_path / "a.csv")) == 24


def test_a_workbook_that_cannot_be_read_is_one_line_and_the_list_is_unchanged(tok_dir, sample_dir, tmp_path,
                                                                              monkeypatch, capsys):
    import openpyxl

    data = sample_dir / "reviews_unlabelled.csv"
    assert main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input={data}", "progress=false"]) == 0
    before = (tok_dir / FILE).read_bytes()
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    capsys.readouterr()

    def refused(book: Path, *needles: str) -> str:
        assert main(["tokenizer", "words", f"tokenizer={tok_dir}", f"input=[{data},{book}]", "text_column=review",
                     "progress=false"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
        for n in needles:
            assert n in err, (n, err)
        assert (tok_dir / FILE).read_bytes() == before
        assert list(temp.iterdir()) == []  # the sheet's copy removed on the error's path too
        return err

    corrupt = tmp_path / "corrupt.xlsx"
    corrupt.write_bytes(os.urandom(4096))
    refused(corrupt, f"{corrupt} is not a readable .xlsx workbook")  # `label`'s line
    # a column the first sheet lacks names the workbook (not its temporary copy) and the sheet that has it
    wb = openpyxl.Workbook()
    wb.active.append(["summary"])
    wb.active.append(["좋아요"])
    wb.create_sheet("Reviews").append(["review"])
    wb.save(tmp_path / "sheets.xlsx")
    err = refused(tmp_path / "sheets.xlsx", f"{tmp_path / 'sheets.xlsx'}: no column 'review'",
                  "sheet 'Reviews' has a column 'review'")
    assert ".csv" not in err

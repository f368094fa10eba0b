"""Prepare once, train anywhere (issue 39 item 3): `koelectra-kit prepare` writes the tokenizer and packed ids to a
folder; `pretrain prepared=DIR` trains from it with neither the corpus nor Kiwi (nor `datasets`) importable, on
exactly the ids a run from the corpus trains on; a damaged or mismatched folder is one `error:` line."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from koelectra_kit.cli import main
from koelectra_kit.pretrain import read_metrics

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "pretrain" / "tiny.yaml"
RUN = ["progress=false", "plots=false", "max_steps=4", "log_every=1", "save_every=0"]


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(rc, err, *needles):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_the_folder_holds_the_tokenizer_the_ids_and_what_made_them(prepared, sample_dir):
    assert {p.name for p in prepared.iterdir()} == {"tokenizer", "rows.arrow", "meta.json", "prepared.json"}
    info = json.loads((prepared / "prepared.json").read_text())
    meta = json.loads((prepared / "meta.json").read_text())
    assert info["corpus"] == [str(sample_dir / "comments.txt")] and info["seq_len"] == meta["seq_len"] == 64
    assert info["rows"] == meta["rows"] > 50 and info["tokenizer"]["presplit"] == "kiwi_word"
    assert (prepared / "tokenizer" / "tokenizer.json").is_file()


def test_a_run_from_the_folder_without_kiwi_or_datasets_equals_the_run_from_the_corpus(
        prepared, tiny_cfg, tmp_path, pretrain_cache):
    """The GPU machine's situation: kiwipiepy and datasets cannot be imported. Same seed, same ids: the same
    losses, step for step, as the run that packed the corpus itself; the export loads with transformers."""
    from koelectra_kit.pretrain import pretrain

    pretrain(tiny_cfg(f"out={tmp_path / 'from_corpus'}"))
    argv = ["pretrain", "--config", str(TINY), f"prepared={prepared}", f"out={tmp_path / 'gpu'}", *RUN]
    code = ("import sys; sys.modules.update(kiwipiepy=None, kiwipiepy_model=None, datasets=None)\n"
            f"from koelectra_kit.cli import main\nsys.exit(main({argv!r}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    corpus_rows = read_metrics(tmp_path / "from_corpus" / "metrics.jsonl")
    prepared_rows = read_metrics(tmp_path / "gpu" / "metrics.jsonl")
    assert [r["loss"] for r in prepared_rows] == [r["loss"] for r in corpus_rows] and len(corpus_rows) == 4
    from transformers import AutoModel

    enc = AutoModel.from_pretrained(tmp_path / "gpu" / "discriminator")
    assert enc.config.vocab_size == json.loads((prepared / "meta.json").read_text())["vocab_size"]
    card = (tmp_path / "gpu" / "discriminator" / "README.md").read_text()
    assert f"prepared={prepared}" in card and "comments.txt" in card  # the card names the text behind the ids


def test_the_folder_sets_seq_len_with_a_notice_and_resume_continues(prepared, tmp_path, capsys):
    out = tmp_path / "run"
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={prepared}", f"out={out}", "seq_len=128",
                         *RUN, "save_every=2")
    assert rc == 0 and "seq_len=128 replaced by 64" in err
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={prepared}", f"out={out}", *RUN,
                         "max_steps=6", "resume=true")
    assert rc == 0 and "resumed from" in err
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("extra,needle", [
    (["corpus=x.txt"], "drop corpus="),
    (["tokenizer=tok"], "drop tokenizer="),
])
def test_prepared_with_a_corpus_or_tokenizer_is_refused(prepared, tmp_path, capsys, extra, needle):
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={prepared}", f"out={tmp_path / 'r'}",
                         *RUN, *extra)
    one_line_error(rc, err, needle)
    assert not (tmp_path / "r").exists()


def test_a_word_list_given_to_the_folders_tokenizer_keeps_it_valid_and_goes_with_the_encoder(
        prepared, tmp_path, capsys, sample_dir):
    """docs/pretrain.md: the folder's tokenizer gets the words of the files to fine-tune on there (no Kiwi on the GPU
    machine); the folder still opens (its tokenizer's ids are unchanged) and the exported encoder carries the list."""
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    rc, _, err = run_cli(capsys, "tokenizer", "words", f"tokenizer={copy / 'tokenizer'}",
                         f"input={sample_dir / 'reviews_labelled.csv'}", "progress=false")
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={copy}", f"out={tmp_path / 'r'}", *RUN)
    assert rc == 0, err
    words = (copy / "tokenizer" / "kiwi_words.tsv").read_bytes()
    assert (tmp_path / "r" / "discriminator" / "kiwi_words.tsv").read_bytes() == words and len(words) > 10_000


def damage(folder: Path, how: str) -> None:
    if how == "missing rows":
        (folder / "rows.arrow").unlink()
    elif how == "cut rows":
        data = (folder / "rows.arrow").read_bytes()
        (folder / "rows.arrow").unlink()  # a hard link to the cache: never write through it
        (folder / "rows.arrow").write_bytes(data[:len(data) // 3])
    elif how == "other tokenizer":
        vocab = folder / "tokenizer" / "vocab.txt"
        vocab.write_text(vocab.read_text(encoding="utf-8") + "새토큰\n", encoding="utf-8")
    elif how == "future format":
        info = json.loads((folder / "prepared.json").read_text())
        (folder / "prepared.json").write_text(json.dumps({**info, "format": 99}))
    elif how == "not json":
        (folder / "prepared.json").write_text("{")
    elif how in ("same-size edit", "ids past the vocabulary"):  # new files: the folder's are links to the cache
        data = bytearray((folder / "rows.arrow").read_bytes())
        value = (5, 0) if how == "same-size edit" else (0xFF, 0xFF)  # id 5, or 65535 against a 2,000-token vocab
        for i in range(len(data) // 2 - 400, len(data) // 2, 2):
            data[i], data[i + 1] = value
        (folder / "rows.arrow").unlink()
        (folder / "rows.arrow").write_bytes(bytes(data))
        if how == "ids past the vocabulary":  # a folder of a version that kept no digest of its rows
            info = json.loads((folder / "prepared.json").read_text())
            (folder / "prepared.json").write_text(json.dumps({k: v for k, v in info.items() if k != "rows_digest"}))
    elif how in ("fewer rows", "shorter rows", "info seq_len"):  # hand-edited: read as they say, trained on less
        name, key, value = {"fewer rows": ("meta.json", "rows", 5), "shorter rows": ("meta.json", "seq_len", 32),
                            "info seq_len": ("prepared.json", "seq_len", 32)}[how]
        info = json.loads((folder / name).read_text())
        (folder / name).write_text(json.dumps({**info, key: value}))


@pytest.mark.parametrize("how,needle", [
    ("missing rows", "rows.arrow missing"),
    ("cut rows", "cut short"),
    ("other tokenizer", "not the one its rows were made with"),
    ("future format", "format 99"),
    ("not json", "cannot read"),
    ("fewer rows", "meta.json says 5 of"),
    ("shorter rows", "of 32, prepared.json says"),
    ("info seq_len", "prepared.json says"),
    ("same-size edit", "rows.arrow is not the file `prepare` wrote"),
    ("ids past the vocabulary", "holds id 65535, past its tokenizer's 2000 tokens"),
])
def test_a_damaged_folder_is_one_line_and_no_run_folder(prepared, tmp_path, capsys, how, needle):
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    damage(copy, how)
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={copy}", f"out={tmp_path / 'r'}", *RUN)
    one_line_error(rc, err, needle)
    assert not (tmp_path / "r").exists()


def test_a_corpus_too_small_to_train_on_is_refused_where_it_is_prepared(tmp_path, capsys, pretrain_tokenizer):
    """prepare wrote the folder (exit 0) and pretrain refused it on the GPU machine, with a hint (lower seq_len)
    that a prepared folder's fixed seq_len could not take."""
    one = tmp_path / "one.txt"
    one.write_text("안녕하세요 반갑습니다\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"corpus={one}", f"tokenizer={pretrain_tokenizer}",
                         f"out={tmp_path / 'p'}", f"cache_dir={tmp_path / 'cache'}", "progress=false")
    one_line_error(rc, err, "corpus too small", "add text (or lower seq_len)")
    assert not (tmp_path / "p").exists()


def test_missing_or_foreign_folders_and_outputs_are_refused(prepared, tmp_path, capsys, sample_dir):
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={tmp_path / 'nope'}", f"out={tmp_path / 'r'}")
    one_line_error(rc, err, "no such folder")
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={sample_dir}", f"out={tmp_path / 'r'}")
    one_line_error(rc, err, "not a prepared-data folder")
    # prepare never writes into a folder that is not its own, and replaces its own only when asked
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"corpus={sample_dir / 'comments.txt'}",
                         f"out={sample_dir}")
    one_line_error(rc, err, "not a prepared-data folder")
    before = (prepared / "prepared.json").read_text()
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"corpus={sample_dir / 'comments.txt'}",
                         f"out={prepared}")
    one_line_error(rc, err, "overwrite=true")
    assert (prepared / "prepared.json").read_text() == before
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"prepared={prepared}", f"out={tmp_path / 'p'}")
    one_line_error(rc, err, "takes no prepared=")


def test_continued_pretraining_from_a_folder_prepared_with_the_same_init(tiny_run, prepared, tmp_path, capsys,
                                                                         sample_dir):
    """init= packs with the checkpoint's tokenizer; training from that folder continues the checkpoint, and a folder
    of another vocabulary is refused before anything is written."""
    folder = tmp_path / "for-init"
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"corpus={sample_dir / 'comments.txt'}",
                         f"init={tiny_run}", f"out={folder}", "progress=false")
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={folder}", f"init={tiny_run}",
                         f"out={tmp_path / 'cont'}", *RUN)
    assert rc == 0 and f"continuing from {tiny_run}" in err, err
    # without init= it trained from random weights, no word
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={folder}", f"out={tmp_path / 'scratch'}",
                         *RUN)
    one_line_error(rc, err, f"was made for continued pretraining from init={tiny_run}: pass init={tiny_run}",
                   f"or prepare with tokenizer={tiny_run / 'tokenizer'} to train from scratch")
    assert json.loads((folder / "prepared.json").read_text())["init"] == str(tiny_run.resolve())
    other = tmp_path / "other-vocab"
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"corpus={sample_dir / 'comments.txt'}",
                         f"out={other}", "vocab_size=700", "progress=false")
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={other}", f"init={tiny_run}",
                         f"out={tmp_path / 'bad'}", *RUN)
    one_line_error(rc, err, "another vocabulary")
    assert not (tmp_path / "bad").exists()


def test_a_folder_written_over_in_place_neither_trains_nor_poisons_the_cache(tmp_path, capsys, sample_dir,
                                                                              pretrain_tokenizer):
    """A prepared folder's rows.arrow is a hard link to the packed cache's: `cp` of another folder's files over it
    wrote the cache's too, and a run from the corpus then trained on the other corpus while naming its own (exit 0),
    as did every folder prepared from that corpus after. The folder's rows are checked by their digest, the cache's
    by its own record (meta.json is copied into the folder, not linked), and a changed cache entry is packed again.
    A .DS_Store added to the folder's tokenizer/ is no change."""
    cache = tmp_path / "cache"
    common = ["--config", TINY, f"tokenizer={pretrain_tokenizer}", f"cache_dir={cache}", "progress=false"]
    other = tmp_path / "other.txt"
    other.write_text("".join(f"다른 말뭉치 문장 {i} 입니다 정말로\n" for i in range(400)), encoding="utf-8")
    comments = sample_dir / "comments.txt"
    for name, corpus in (("a", comments), ("b", other)):
        assert run_cli(capsys, "prepare", *common, f"corpus={corpus}", f"out={tmp_path / name}")[0] == 0
    a, b = tmp_path / "a", tmp_path / "b"
    texts = json.loads((a / "prepared.json").read_text())["texts"]
    assert (a / "meta.json").stat().st_nlink == 1  # copied, not linked
    with open(a / "rows.arrow", "wb") as f:  # as `cp b/rows.arrow a/rows.arrow` writes: into the linked file
        f.write((b / "rows.arrow").read_bytes())
    shutil.copyfile(b / "meta.json", a / "meta.json")
    rc, _, err = run_cli(capsys, "pretrain", *common[:2], f"prepared={a}", f"out={tmp_path / 'r'}", *RUN)
    one_line_error(rc, err, "rows.arrow is not the file `prepare` wrote")
    rc, _, err = run_cli(capsys, "pretrain", *common, f"corpus={comments}", f"out={tmp_path / 'r2'}", *RUN)
    assert rc == 0 and "changed since they were written" in err, err
    summary = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert summary["data"]["texts"] == texts  # the comments, not the other corpus
    (b / "tokenizer" / ".DS_Store").write_bytes(b"\0\1")
    assert run_cli(capsys, "pretrain", *common[:2], f"prepared={b}", f"out={tmp_path / 'r3'}", *RUN)[0] == 0


def test_prepare_says_which_keys_are_for_the_training_run(tmp_path, capsys, sample_dir, pretrain_tokenizer):
    """resume=true (or lr=) given to prepare was accepted without a word."""
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"corpus={sample_dir / 'comments.txt'}",
                         f"tokenizer={pretrain_tokenizer}", f"out={tmp_path / 'p'}", f"cache_dir={tmp_path / 'c'}",
                         "progress=false", "resume=true", "lr=0.01")
    assert rc == 0, err
    assert "note: prepare packs the data; lr, resume are for the training run" in err

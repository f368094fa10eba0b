"""The kiwi_word cache across processes (tokenizer/wordfile.py): a process leaves the words it analysed in the cache
folder, the next one starts with them and sends none of them to Kiwi, with the ids a fresh Kiwi gives; a damaged
file is ignored with one warning and replaced; another Kiwi reads another file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from koelectra_kit.tokenizer import kiwi_versions, wordfile

ROOT = Path(__file__).resolve().parent.parent
# one process's job: encode the texts, report the ids and how many words its cache found and sent to Kiwi
ENCODE = """
import json, sys
from koelectra_kit.tokenizer import KoTokenizer, wordsplit
tok = KoTokenizer.from_pretrained(sys.argv[1])
texts = json.load(open(sys.argv[2], encoding="utf-8"))
ids = tok.encode_batch(texts, return_offsets=False)["input_ids"]
cache = wordsplit.word_cache(0)
print(json.dumps({"ids": ids, "hits": cache.hits, "misses": cache.misses}))
"""


@pytest.fixture
def texts(tmp_path, sample_dir) -> Path:
    lines = [t for t in (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines() if t.strip()]
    path = tmp_path / "texts.json"
    texts = lines[:150] + ["", "  띄어 쓰기\t탭 ", "ㅋㅋㅋㅋ 닼ㅋ"]
    path.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    return path


def encode(tokenizer: Path, texts: Path, cache: Path, on: bool = True) -> tuple[dict, str]:
    env = {**os.environ, "KOELECTRA_CACHE": str(cache), "KOELECTRA_WORD_FILE": "1" if on else "0",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", ENCODE, str(tokenizer), str(texts)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1]), proc.stderr


def word_file(cache: Path) -> Path:
    files = list((cache / "words").glob("*.tsv"))
    assert len(files) == 1, files
    return files[0]


def test_the_next_process_starts_with_the_words_and_gets_the_same_ids(sample_tokenizer_dir, texts, tmp_path):
    cache = tmp_path / "cache"
    fresh, _ = encode(sample_tokenizer_dir, texts, tmp_path / "off", on=False)
    first, _ = encode(sample_tokenizer_dir, texts, cache)
    assert first["hits"] == 0 and first["misses"] > 300 and first["ids"] == fresh["ids"]
    path = word_file(cache)
    v = kiwi_versions()
    assert v["kiwipiepy"] in path.name and str(v["kiwipiepy_model"]) in path.name  # another Kiwi: another file
    entries = wordfile.parse(path.read_text(encoding="utf-8"))
    assert len(entries) == first["misses"]
    written = path.stat().st_mtime_ns
    second, _ = encode(sample_tokenizer_dir, texts, cache)
    assert second["misses"] == 0 and second["hits"] == first["misses"]  # no word went to Kiwi
    assert second["ids"] == fresh["ids"]
    assert path.stat().st_mtime_ns == written  # nothing new: not rewritten
    assert not (tmp_path / "off" / "words").exists()  # KOELECTRA_WORD_FILE=0: nothing read, nothing written


def test_a_damaged_file_is_ignored_with_one_warning_and_replaced(sample_tokenizer_dir, texts, tmp_path):
    cache = tmp_path / "cache"
    first, _ = encode(sample_tokenizer_dir, texts, cache)
    path = word_file(cache)
    lines = path.read_text(encoding="utf-8").splitlines()
    word = lines[0].split("\t")[0]
    # a cut past the word's end would give wrong pieces, silently, if it were used
    path.write_text("\n".join([f"{word}\t{len(word) + 3}", *lines[1:]]) + "\n", encoding="utf-8")
    again, err = encode(sample_tokenizer_dir, texts, cache)
    warning = [ln for ln in err.splitlines() if "word cache" in ln]
    assert len(warning) == 1 and "line 1" in warning[0] and str(path) in warning[0], err
    assert again["hits"] == 0 and again["ids"] == first["ids"]  # as if there were no file
    assert len(wordfile.parse(path.read_text(encoding="utf-8"))) == again["misses"]  # replaced by a good one


@pytest.mark.parametrize("line", ["좋아요", "좋아요\t5", "좋아요\t0", "좋아요\t2,1", "좋아요\t1,1", "좋 아요\t1",
                                  "\t1", "좋아요\tx", "좋아요\t1,", " 좋아요\t1"])
def test_parse_refuses_a_line_that_is_not_a_word_and_its_cuts(line):
    with pytest.raises(ValueError, match="line 2"):
        wordfile.parse("영화\t\n" + line + "\n")


def test_parse_reads_words_and_cuts():
    entries = wordfile.parse("영화\t\n봤는데\t1\nㅋㅋ재밌다\t2,3\n")
    assert entries == [("영화", ()), ("봤는데", (1,)), ("ㅋㅋ재밌다", (2, 3))]


def test_a_cache_folder_that_cannot_be_written_never_fails_the_run(sample_tokenizer_dir, texts, tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be\n", encoding="utf-8")
    fresh, _ = encode(sample_tokenizer_dir, texts, tmp_path / "off", on=False)
    got, err = encode(sample_tokenizer_dir, texts, blocked)  # reading finds nothing, writing fails: both quietly
    assert got["ids"] == fresh["ids"] and "Traceback" not in err
    assert blocked.read_text(encoding="utf-8") == "a file where the cache folder should be\n"


def test_a_process_keeps_the_words_others_wrote_while_it_ran(tmp_path, monkeypatch):
    """Shards of one job end one after the other: each merges the file as it finds it under its own words."""
    from koelectra_kit.tokenizer import wordsplit

    monkeypatch.setenv("KOELECTRA_WORD_FILE", "1")
    monkeypatch.setenv("KOELECTRA_CACHE", str(tmp_path))
    monkeypatch.setattr(wordfile, "_STATE", {"path": None, "pid": None, "loaded": False, "stored": 0,
                                             "registered": True})  # (no exit hook for this test's cache)
    cache = wordsplit.WordCache(1000)
    wordfile.load_into(cache)  # no file yet: starts empty
    assert len(cache) == 0
    cache.store([("영화", ()), ("봤는데", (1,))])  # this process's words
    wordfile.path().parent.mkdir(parents=True)
    wordfile.path().write_text("재밌다\t1\n영화\t\n", encoding="utf-8")  # another shard ended meanwhile
    wordfile.save(cache)
    assert wordfile.parse(wordfile.path().read_text(encoding="utf-8")) == [("재밌다", (1,)), ("영화", ()), ("봤는데", (1,))]
    written = wordfile.path().stat().st_mtime_ns
    wordfile.save(cache)  # nothing new since: not written again
    assert wordfile.path().stat().st_mtime_ns == written

"""The word-level pre-split (presplit: kiwi_word), its per-process word cache, old-mode folders unchanged beside it,
and the corpus pre-split built in pieces that survive a kill (issue 31 items 1-3)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.tokenizer.normalize import NormalizeConfig, Normalizer
from koelectra_kit.tokenizer import (KoTokenizer, TokenizerConfig, kiwi, kiwi_instance, kiwi_versions, mark_pieces,
                                     pieces_from_tokens, presplit_file, tokenizer_fingerprint, train_tokenizer)
from koelectra_kit.tokenizer import cache as corpus_cache
from koelectra_kit.tokenizer import wordsplit

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))
import golden_common as gc  # noqa: E402

HOSTILE = [
    "", " ", "     ", "\t \u3000 \xa0", "😀", "😀😀😀 👍🏻👍🏻", "ㅋ", "ㅋㅋㅋㅋㅋㅋㅋㅋ", "닼ㅋㅋㅋ 웃기넼ㅋㅋ", "ㅠㅠ^^;;",
    "영화는봤는데별로였음", "English와 한국어 mixed123 漢字語 カタカナ Ελληνικά", "내面 衝動 😀영화",
    "가" * 5000, "ㅋㅎ" * 3000 + " 끝", "a" * 300 + "한" * 300, "zero\u200bwidth\u200d조\u200c인\ufeff", "\u200b",
    "##해시 #태그 ##", "[URL] 여기 https://a.b/c 봐 [USER]님 [EMAIL]", "탭\t두  칸\n줄", " 앞뒤 공백 ",
    "😀\u200d😀 ️", "a\u0301 한\u1100\u1161 각",
]


def _word_pieces(text: str) -> list[str]:
    """The definition: each whitespace-separated word analysed by Kiwi alone, "##" as the kiwi mode puts it."""
    spans = []
    for m in re.finditer(r"\S+", text):
        w = m.group()
        sp = pieces_from_tokens(w, kiwi_instance(1).tokenize(w))
        sp = kiwi.protect_placeholders(w, sp) if "[" in w else sp  # [URL] [EMAIL] [USER] kept whole, as in kiwi
        cuts = [a for a, _ in sp[1:]]
        edges = [0, *cuts, len(w)]
        spans += [(m.start() + a, m.start() + b) for a, b in zip(edges, edges[1:])]
    return mark_pieces(text, spans)


@pytest.fixture(scope="module")
def word_tokenizer_dir(tmp_path_factory, sample_dir, kiwi_cache) -> Path:
    out = tmp_path_factory.mktemp("tokw") / "tok"
    train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(out), vocab_size=2000,
                                    presplit="kiwi_word", cache_dir=str(kiwi_cache), progress=False))
    return out


def _corpus_texts(sample_dir: Path) -> list[str]:
    return gc.sample_texts(sample_dir)


# -- item 1: the mode, recorded in the folder
def test_word_mode_is_recorded_and_splits_each_word_alone(word_tokenizer_dir, sample_dir):
    settings = json.loads((word_tokenizer_dir / "koelectra_tokenizer.json").read_text(encoding="utf-8"))
    assert settings["presplit"] == "kiwi_word" and settings["kiwi"] == kiwi_versions()
    assert settings["fallback"] == "jamo_bytes"
    tok = KoTokenizer.from_pretrained(word_tokenizer_dir)
    assert tok.presplit == "kiwi_word"
    texts = _corpus_texts(sample_dir)[:200] + HOSTILE[:12]
    want = [tok.presplit_line(" ".join(_word_pieces(tok.normalize(t)))) for t in texts]  # (with the fallback)
    assert tok.presplit_batch(texts) == want
    assert tok.presplit_text("영화는 봤는데 재밌었다") == ["영화", "##는", "봤", "##는데", "재밌", "##었", "##다"]
    # the unknown-character fallback as in the kiwi mode: nothing lost to [UNK], decode exact
    for text in texts + HOSTILE:
        ids = tok.encode(text).ids
        assert tok.unk_token_id not in ids, text
        if "##" not in text:  # a lone "##" word decodes as a mark, in the kiwi mode too (WordPiece's decoder)
            assert tok.decode(ids) == tok.normalize(text), text


def test_word_mode_offsets_point_into_the_text_as_given(word_tokenizer_dir, sample_dir):
    tok = KoTokenizer.from_pretrained(word_tokenizer_dir)
    texts = _corpus_texts(sample_dir)
    enc = tok.encode_batch(texts, return_tokens=True)
    checked = 0
    for text, toks, offs in zip(texts, enc["tokens"], enc["offsets"]):
        if tok.normalize(text) != text:
            continue
        for t, (a, b) in zip(toks[1:-1], offs[1:-1]):
            body = t.removeprefix("##")
            if not body.startswith("<0x") and not re.match("[\u1100-\u11ff]", body):  # not fallback tokens
                assert text[a:b] == body, (text, t, a, b)
                checked += 1
    assert checked > 1000


def test_tokenizer_train_cli_takes_presplit_kiwi_word(tmp_path, sample_dir):
    out = tmp_path / "tok"
    rc = main(["tokenizer", "train", "--config", "tiny", f"input={sample_dir / 'comments.txt'}", f"out={out}",
               "presplit=kiwi_word", "word_cache=1000", f"cache_dir={tmp_path / 'c'}", "progress=false"])
    assert rc == 0
    assert json.loads((out / "koelectra_tokenizer.json").read_text())["presplit"] == "kiwi_word"


def test_a_presplit_this_version_does_not_know_is_refused(word_tokenizer_dir, tmp_path):
    import shutil

    d = tmp_path / "tok"
    shutil.copytree(word_tokenizer_dir, d)
    s = json.loads((d / "koelectra_tokenizer.json").read_text())
    s["presplit"] = "kiwi_sentence"
    (d / "koelectra_tokenizer.json").write_text(json.dumps(s))
    with pytest.raises(InputError, match="kiwi_sentence"):
        KoTokenizer.from_pretrained(d)


# -- tokenizers saved before the mode: exactly as they were
@pytest.mark.parametrize("name,fingerprint", [("tok_wordpiece", "cc8d3adb05f3d168"),
                                              ("tok_characters", "835805bb039f11ab")])
def test_old_mode_folders_load_and_encode_exactly_as_before(name, fingerprint, word_tokenizer_dir, sample_dir):
    # the word cache filled first: the kiwi mode must not touch it
    KoTokenizer.from_pretrained(word_tokenizer_dir).encode_batch(_corpus_texts(sample_dir))
    tok = KoTokenizer.from_pretrained(GOLDEN / name)
    assert tok.presplit == "kiwi"
    assert tokenizer_fingerprint(tok) == fingerprint  # saves the same files: checkpoints and caches stay valid
    want = [json.loads(line) for line in (GOLDEN / f"{name}.sample.jsonl").read_text(encoding="utf-8").splitlines()]
    assert gc.encode_rows(GOLDEN / name, _corpus_texts(sample_dir)) == want  # ids and offsets captured before


# -- item 2: the cache is exact
def test_word_boundaries_are_the_ones_str_split_and_kiwi_use():
    spaces = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
    assert re.findall(r"\s", spaces) == list(spaces)
    assert not any(re.match(r"\s", chr(c)) for c in range(0x110000) if not chr(c).isspace())


@pytest.mark.parametrize("normalized", [True, False])
def test_cached_and_uncached_pieces_are_identical(sample_dir, normalized):
    norm = Normalizer(NormalizeConfig()) if normalized else (lambda t: t)
    texts = [norm(t) for t in _corpus_texts(sample_dir) + HOSTILE]
    if normalized:
        texts += [norm(line) for line in (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()]
    wordsplit.word_cache(0).clear()
    uncached = wordsplit.pieces(texts, 1, capacity=0)
    assert len(wordsplit.word_cache(0)) == 0  # capacity 0 never touches the cache
    cold = wordsplit.pieces(texts, 1, capacity=100_000)
    warm = wordsplit.pieces(texts, 1, capacity=100_000)
    assert wordsplit.word_cache(0).hits > 0
    assert uncached == cold == warm
    cache = wordsplit.word_cache(0)
    cache.clear()
    cache.capacity = 7  # evicting all the time, and one text at a time
    assert [wordsplit.pieces([t], 1, capacity=7)[0] for t in texts] == uncached
    assert len(cache) <= 7
    cache.capacity = 100_000
    # and the definition, word by word
    assert uncached == [_word_pieces(t) for t in texts]


def test_tokenizer_ids_and_offsets_with_and_without_the_cache(word_tokenizer_dir, sample_dir):
    texts = _corpus_texts(sample_dir) + HOSTILE
    plain = KoTokenizer.from_pretrained(word_tokenizer_dir, word_cache=0).encode_batch(texts, max_length=128)
    cached = KoTokenizer.from_pretrained(word_tokenizer_dir)
    assert cached.encode_batch(texts, max_length=128) == plain
    assert cached.encode_batch(texts, max_length=128) == plain  # warm


def test_word_cache_is_a_bounded_lru():
    c = wordsplit.WordCache(3)
    c.store([("a", ()), ("b", (1,)), ("c", ())])
    found: dict = {}
    assert c.lookup(["a", "x"], found) == ["x"] and found == {"a": ()}
    c.store([("d", ())])  # evicts b, the least recently used ("a" was just used)
    found = {}
    assert c.lookup(["a", "b", "c", "d"], found) == ["b"] and set(found) == {"a", "c", "d"}


def test_a_forked_child_gets_its_own_cache_lock(word_tokenizer_dir):
    import multiprocessing as mp

    cache = wordsplit.word_cache(1000)
    cache.store([("영화", ())])
    with cache._lock:  # held by this process (as by another thread) at the fork
        ctx = mp.get_context("fork")
        p = ctx.Process(target=_child_lookup)
        p.start()
        p.join(60)
    assert p.exitcode == 0, "the forked child deadlocked on the inherited lock"


def _child_lookup():
    found: dict = {}
    wordsplit.word_cache(1000).lookup(["영화"], found)
    os._exit(0 if found == {"영화": ()} else 3)


def test_corpus_ids_in_word_mode_are_encode_batch_ids(word_tokenizer_dir, sample_dir, tmp_path):
    tok = KoTokenizer.from_pretrained(word_tokenizer_dir)
    ids = list(tok.iter_corpus_ids([sample_dir / "comments.txt"], cache_dir=str(tmp_path)))
    texts = [t for t in (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines() if tok.normalize(t)]
    assert ids == [x[1:-1] for x in tok.encode_batch(texts, return_offsets=False)["input_ids"]]


# -- item 3: the corpus pre-split in pieces
def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def test_presplit_in_pieces_is_the_file_one_pass_writes(sample_dir, tmp_path):
    kw = {"text_column": None, "normalize": NormalizeConfig()}
    for mode in ("kiwi", "kiwi_word", "none"):
        one = presplit_file(sample_dir / "comments.txt", presplit=mode, cache_dir=tmp_path / f"one-{mode}", **kw)
        many = presplit_file(sample_dir / "comments.txt", presplit=mode, cache_dir=tmp_path / f"many-{mode}",
                             num_workers=1, piece_bytes=3000, **kw)
        assert one.name == many.name and one.read_bytes() == many.read_bytes(), mode
        assert [p.name for p in many.parent.iterdir()] == [many.name]  # the pieces' folder is gone
        if mode == "kiwi" and kiwi_versions() == {"kiwipiepy": "0.24.1", "kiwipiepy_model": "0.24.0"}:
            # the bytes today's caches have (written by the one-pass code before pieces); the name changed once, when
            # special strings were kept whole ("specials" in the key: a cache made before cut "[SEP]" into pieces)
            assert (one.name, _digest(one)) == ("comments-c8ae219561bdf0955063.txt", "35db28ec4f28f8ea")
    # max_lines: the first N texts, in pieces too
    a = presplit_file(sample_dir / "comments.txt", presplit="kiwi_word", cache_dir=tmp_path / "ml1", max_lines=123,
                      **kw)
    b = presplit_file(sample_dir / "comments.txt", presplit="kiwi_word", cache_dir=tmp_path / "ml2", max_lines=123,
                      num_workers=1, piece_bytes=2000, **kw)
    assert a.read_bytes() == b.read_bytes() and len(a.read_text(encoding="utf-8").splitlines()) == 123


def test_presplit_in_worker_processes_is_the_same_file(sample_dir, tmp_path):
    kw = {"text_column": None, "normalize": NormalizeConfig(), "presplit": "kiwi_word"}
    one = presplit_file(sample_dir / "comments.txt", cache_dir=tmp_path / "one", **kw)
    pool = presplit_file(sample_dir / "comments.txt", cache_dir=tmp_path / "pool", num_workers=2, piece_bytes=4000,
                         **kw)
    assert one.read_bytes() == pool.read_bytes()



def test_a_corpus_presplit_keeps_more_words_than_labelling(sample_dir, tmp_path, monkeypatch):
    """A corpus keeps meeting new words: its pre-split asks for a million-word cache per process (labelling and the
    tokenizer it returns keep 200,000), and word_cache=0 still turns the cache off."""
    from koelectra_kit.tokenizer.config import CORPUS_WORD_CACHE, WORD_CACHE

    asked = []
    real = wordsplit.cuts_of
    monkeypatch.setattr(wordsplit, "cuts_of", lambda words, workers, capacity, *rest: asked.append(capacity)
                        or real(words, workers, capacity, *rest))
    kw = {"text_column": None, "normalize": NormalizeConfig(), "presplit": "kiwi_word", "num_workers": 1}
    presplit_file(sample_dir / "comments.txt", cache_dir=tmp_path / "a", **kw)
    assert set(asked) == {CORPUS_WORD_CACHE} and CORPUS_WORD_CACHE > WORD_CACHE
    asked.clear()
    presplit_file(sample_dir / "comments.txt", cache_dir=tmp_path / "b", word_cache=0, **kw)
    assert set(asked) == {0}

@pytest.mark.parametrize("mode", ["kiwi", "kiwi_word"])
def test_a_killed_presplit_continues_from_its_finished_pieces(sample_dir, tmp_path, monkeypatch, mode):
    kw = {"text_column": None, "normalize": NormalizeConfig(), "presplit": mode, "num_workers": 1,
          "piece_bytes": 3000}
    want = presplit_file(sample_dir / "comments.txt", cache_dir=tmp_path / "whole", **kw).read_bytes()
    real, ran = corpus_cache.PieceJob.run, []

    def dies_after_piece_3(self, index, *args, **kwargs):
        if index == 4:
            raise KeyboardInterrupt("killed")
        ran.append(index)
        return real(self, index, *args, **kwargs)

    monkeypatch.setattr(corpus_cache.PieceJob, "run", dies_after_piece_3)
    with pytest.raises(KeyboardInterrupt):
        presplit_file(sample_dir / "comments.txt", cache_dir=tmp_path / "killed", **kw)
    assert ran == [0, 1, 2, 3] and not list((tmp_path / "killed" / "presplit").glob("*.txt"))

    def counting(self, index, *args, **kwargs):
        ran.append(index)
        return real(self, index, *args, **kwargs)

    ran.clear()
    monkeypatch.setattr(corpus_cache.PieceJob, "run", counting)
    got = presplit_file(sample_dir / "comments.txt", cache_dir=tmp_path / "killed", **kw)
    assert ran and ran[0] == 4  # pieces 0-3 were not redone
    assert got.read_bytes() == want


@pytest.mark.slow
def test_a_presplit_killed_by_sigkill_continues_to_the_same_cache(sample_dir, tmp_path):
    """A real kill (SIGKILL of the process, its worker processes left behind) of a 2-process pre-split of ~3 MB,
    a rerun, and the bytes of an uninterrupted run; the orphaned workers end on their own."""
    import psutil

    lines = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "corpus.txt"
    with open(corpus, "w", encoding="utf-8") as f:
        for k in range(80):  # lightly perturbed copies, not one text block repeated
            for i, line in enumerate(lines):
                f.write(f"{line} {k}번째 {i % 7}\n" if (i + k) % 3 else f"{k} {line}\n")
    code = ("import sys; from koelectra_kit.tokenizer.normalize import NormalizeConfig; "
            "from koelectra_kit.tokenizer import presplit_file; "
            f"presplit_file({str(corpus)!r}, text_column=None, normalize=NormalizeConfig(), presplit='kiwi_word', "
            "cache_dir=sys.argv[1], num_workers=2, piece_bytes=64 << 10)")
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", code, str(killed)])
    deadline = time.time() + 600
    while time.time() < deadline and len(list(killed.glob("presplit/.*.parts-*/*.json"))) < 8:
        time.sleep(0.2)
    assert proc.poll() is None, "finished before the kill: make the corpus bigger"
    workers = psutil.Process(proc.pid).children()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not list(killed.glob("presplit/*.txt"))
    gone, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, "worker processes outlived the killed run"
    rerun = subprocess.run([sys.executable, "-c", code, str(killed)], timeout=600)
    assert rerun.returncode == 0
    whole = subprocess.run([sys.executable, "-c", code, str(tmp_path / "whole")], timeout=600)
    assert whole.returncode == 0
    (a,), (b,) = list(killed.glob("presplit/*.txt")), list((tmp_path / "whole").glob("presplit/*.txt"))
    assert a.name == b.name and a.read_bytes() == b.read_bytes()

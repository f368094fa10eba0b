"""Two runs pre-splitting one corpus at once (two pretraining runs started together) share its cache: the second
waits for the first instead of sweeping its half-written pieces (it failed with 'No such file ... .tmp')."""
import multiprocessing as mp
from pathlib import Path

from koelectra_kit.tokenizer.normalize import NormalizeConfig
from koelectra_kit.tokenizer import presplit_file


def _split(args):
    corpus, cache = args
    out = presplit_file(corpus, text_column=None, normalize=NormalizeConfig(), presplit="kiwi", num_workers=1,
                        cache_dir=cache, piece_bytes=2_000)
    return str(out), Path(out).read_bytes()


def test_two_processes_pre_splitting_one_corpus_at_once_get_one_cache(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"배송이 {i}일 걸렸어요 ㅋㅋㅋ 맛은 괜찮네요\n" for i in range(400)), encoding="utf-8")
    with mp.get_context("spawn").Pool(2) as pool:
        (p1, b1), (p2, b2) = pool.map(_split, [(corpus, tmp_path / "cache")] * 2)
    assert p1 == p2 and b1 == b2
    assert b1.count(b"\n") == 400
    assert not list((tmp_path / "cache" / "presplit").glob(".*.parts-*"))  # the pieces were joined and swept

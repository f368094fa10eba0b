"""Generated hostile files through ``label`` in-process: quotes, separators, NULs, encodings, field counts and
huge fields. Whatever the file, either a one-line error and no output, or an output in which every row the
generator wrote as a well-formed row appears exactly once, in order, with its id and text unchanged, and every
other row is flagged. The input file is never modified."""
from __future__ import annotations

import hashlib
import json
import random

import pandas as pd
import pytest

from koelectra_kit.errors import KitError
from koelectra_kit.label import label_file

N_FILES = 1000
WORDS = ["좋아요", "별로", "ㅋㅋㅋ", "최고👍", "배송 빨라요", "a,b", 'say "hi"', "줄\n바꿈", "탭\t있음", "  ", "", "內面",
         "#태그", "[URL]", "\\", "'", "x" * 50]


def _text(rng, sep, quoting_ok):
    t = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
    if not quoting_ok:  # unquoted formats: the separator, quotes and newlines can't appear inside a field
        t = t.replace(sep, " ").replace("\n", " ").replace('"', "'")
    if rng.random() < 0.02:
        t += "긴" * rng.randint(140_000, 200_000)  # beyond the csv module's default 128 KiB field limit
    return t


def _csv_field(v: str, sep: str) -> str:
    if any(c in v for c in (sep, '"', "\n", "\r")) or v != v.strip():
        return '"' + v.replace('"', '""') + '"'
    return v


def make_file(rng: random.Random, path_base):
    """-> (path, fmt flags, expected good rows [(id, text)], n_bad_rows, refusal expected). Bad rows never
    swallow good ones: a file with a stray quote has no other quote in it (RFC 4180 can't tell where such a
    record ends). A file is refused only when its columns can't be known (a .jsonl whose first line is not an
    object) or a byte can't be decoded in any Korean encoding."""
    kind = rng.choice(["csv", "csv", "tsv", "jsonl"])
    encoding = rng.choice(["utf-8", "utf-8", "utf-8-sig", "cp949"])
    n = rng.randint(0, 12)
    stray_quote = kind == "csv" and rng.random() < 0.3
    sep = rng.choice([",", ";", "|"]) if kind == "csv" else "\t"
    good, lines, n_bad = [], [], 0
    header = ["id", "review", "extra"]
    for i in range(1, n + 1):
        bad = rng.random() < 0.25
        text = _text(rng, sep, quoting_ok=kind in ("csv", "jsonl") and not stray_quote)
        if encoding == "cp949":
            text = text.encode("cp949", "ignore").decode("cp949")  # emoji have no cp949 form
        if kind == "jsonl":
            if bad:
                lines.append(rng.choice(["{not json", "[1, 2]", '"a string"', "{\"id\": 1,"]))
                n_bad += 1
            else:
                lines.append(json.dumps({"id": str(i), "review": text, "extra": rng.choice([1, None, "x"])},
                                        ensure_ascii=False))
                good.append((str(i), text))
            continue
        if bad:
            choice = rng.choice(["fields", "nul"] + (["quote"] if stray_quote else []))
            if choice == "fields":
                k = rng.choice([1, 2, 4, 5])
                lines.append(sep.join([str(i)] + ["f"] * (k - 1)))
            elif choice == "quote":
                lines.append(f'{i}{sep}"never closed{sep}x')
            else:  # a NUL is just a character of the text (csv reads it since Python 3.11): a good row
                text = "nul\x00 inside"
                lines.append(sep.join([str(i), text, "x"]))
                good.append((str(i), text))
                continue
            n_bad += 1
        else:
            fields = [str(i), text, "x"]
            lines.append(sep.join(_csv_field(f, sep) if kind == "csv" else f for f in fields))
            good.append((str(i), text))
    body = ("" if kind == "jsonl" else sep.join(header) + "\n") + "\n".join(lines) + ("\n" if lines else "")
    if kind == "jsonl" and not lines:
        body = json.dumps({"id": "0", "review": "", "extra": None}) + "\n"
        good.append(("0", ""))
    path = path_base.with_suffix(".jsonl" if kind == "jsonl" else f".{kind}")
    data = body.encode(encoding, "ignore")
    garbage = rng.random() < 0.05 and b"\n" in data
    if garbage:  # bytes neither UTF-8 nor cp949 can decode, in the middle of the file
        cut = data.index(b"\n") + 1
        data = data[:cut] + b"\xff\xfe\x80\xff" + data[cut:]
    path.write_bytes(data)
    refuse = garbage or (kind == "jsonl" and bool(lines) and not _is_object(lines[0]))
    return path, {"sep": sep if kind == "csv" else None}, good, n_bad, refuse


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _read_output(path):
    if path.suffix == ".jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


def test_generated_malformed_files_keep_every_good_row(tmp_path, tiny_classifier):
    rng = random.Random(20261124)
    outcomes = {"labelled": 0, "refused": 0}
    for k in range(N_FILES):
        src, opts, good, n_bad, refuse = make_file(rng, tmp_path / f"in{k}")
        digest = hashlib.sha256(src.read_bytes()).hexdigest()
        out = tmp_path / f"out{k}{'.jsonl' if src.suffix == '.jsonl' else '.csv'}"
        try:
            s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False,
                           chunk_rows=rng.choice([1, 3, 1000]), batch_size=rng.choice([1, 8, 64]), **opts)
        except KitError as e:
            outcomes["refused"] += 1
            assert refuse, (src, e)
            assert "\n" not in str(e) and not out.exists(), (src, e)
            assert not out.with_name(out.name + ".partial").exists()
            continue
        finally:
            assert hashlib.sha256(src.read_bytes()).hexdigest() == digest, f"{src} was modified"
        outcomes["labelled"] += 1
        assert not refuse, src
        got = _read_output(out)
        assert s.rows == len(got) == len(good) + n_bad, (src, s.rows, len(good), n_bad)
        status = got["status"].astype(str).tolist()
        ids = got["id"].astype(str).tolist()
        ok_rows = [(ids[i], str(got["review"][i])) for i in range(len(got)) if not status[i].startswith("error")]
        assert ok_rows == good, src
        assert sum(st.startswith("error") for st in status) == n_bad, src
        out.unlink()
    # the generator must exercise both outcomes, or the test proves less than it says
    assert outcomes["labelled"] > N_FILES * 0.8 and outcomes["refused"] > 20, outcomes

"""Labelling at scale on one machine: repeated texts analysed once (same output), several inputs with one output
each, ``--shard K/N`` + ``label-merge`` giving the unsharded bytes, a killed shard resumed without loss."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.label import label_file, label_files, merge_shards

TEXTS = ["굿", "좋아요", "최고", "별로예요 ㅠㅠ", "배송 빠르고 좋아요", "그냥 그래요", "좋아요ㅋㅋㅋㅋㅋ", "좋아요ㅋㅋ",
         "  좋아요  ", "최고!!!!!!", "최고!!", "다시는 안 삼", ""]


def _write(path, n=90, malformed=True):
    """``n`` rows cycling through TEXTS (so most are exact or normalized repeats), a very long text twice and,
    for CSV, two malformed lines: line numbers must survive sharding."""
    lines = ["id,review,stars"]
    for i in range(n):
        text = TEXTS[(i * 7) % len(TEXTS)]
        lines.append(f'{i},"{text}",{i % 5 + 1}')
        if malformed and i in (20, 61):
            lines.append(f'{i}b,"안 닫힌 따옴표,3' if i == 20 else f"{i}b,필드가,너무,많음")
        if i in (33, 70):
            lines.append(f'{i}L,"{"아주 긴 리뷰 " * 400}",1')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _read(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------------------------------------------------
# repeated texts
# ------------------------------------------------------------------------------------------------------------


def test_dedupe_gives_identical_output_and_is_counted(tmp_path, tiny_classifier, monkeypatch):
    src = _write(tmp_path / "in.csv")
    plain = label_file(None, src, tmp_path / "plain.csv", "review", classifier=tiny_classifier, progress=False,
                       chunk_rows=7, dedupe=False)
    predicted = []
    real = type(tiny_classifier).predict
    monkeypatch.setattr(type(tiny_classifier), "predict",
                        lambda self, texts, **kw: predicted.extend(texts) or real(self, texts, **kw))
    s = label_file(None, src, tmp_path / "dedup.csv", "review", classifier=tiny_classifier, progress=False,
                   chunk_rows=7)
    assert (tmp_path / "dedup.csv").read_bytes() == (tmp_path / "plain.csv").read_bytes()
    assert s.rows == plain.rows and plain.reused == 0
    # each distinct normalized text analysed once (the long one twice: long texts are not kept across chunks),
    # handed to the model as its key, normalized once (the output equals the raw-text path's, above)
    assert len(predicted) == len(set(predicted)) + 1
    keys = {tiny_classifier.tok.normalize(t) for t in TEXTS}
    assert all(p in keys or p.startswith("아주 긴 리뷰") for p in predicted)
    labelled = s.status.get("ok", 0) + s.status.get("truncated", 0)
    assert s.reused == labelled - len(predicted) > labelled / 2


def test_small_cache_and_no_cache_give_the_same_bytes(tmp_path, tiny_classifier):
    src = _write(tmp_path / "in.csv", n=60, malformed=False)
    outs = []
    for i, opts in enumerate([{"dedupe": False}, {"cache_rows": 0}, {"cache_rows": 2}, {}]):
        out = tmp_path / f"o{i}.jsonl"
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=5, **opts)
        outs.append(out.read_bytes())
    assert len(set(outs)) == 1


def test_cli_summary_counts_reused_rows(tmp_path, tiny_classifier_dir, capsys):
    src = _write(tmp_path / "in.csv", n=40, malformed=False)
    rc, out, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                           tmp_path / "o.csv", "--no-progress", "--precision", "fp32")
    assert rc == 0, err
    assert "repeated an earlier text: its prediction was reused" in out


# ------------------------------------------------------------------------------------------------------------
# several inputs
# ------------------------------------------------------------------------------------------------------------


def test_several_inputs_and_a_glob_give_one_output_each(tmp_path, tiny_classifier_dir, tiny_classifier, capsys):
    data = tmp_path / "data"
    data.mkdir()
    a, b = _write(data / "a.csv", n=20), _write(data / "b.csv", n=30, malformed=False)
    pd.read_csv(b, dtype=str).to_parquet(data / "c.parquet")
    for src in (a, b):
        label_file(None, src, tmp_path / f"ref_{src.name}", "review", classifier=tiny_classifier, progress=False)
    out = tmp_path / "out"
    out.mkdir()
    base = ["label", "--model", tiny_classifier_dir, "--no-progress", "--precision", "fp32"]
    rc, printed, err = run_cli(capsys, *base, "--input", a, b, "batch_size=8", "--output", out)
    assert rc == 0, err
    assert "2 files, 50 rows in all" in printed
    for src in (a, b):
        assert (out / src.name).read_bytes() == (tmp_path / f"ref_{src.name}").read_bytes()
    rc, _, err = run_cli(capsys, *base, "--input", str(data / "*"), "--output", tmp_path / "out2/")
    assert rc == 2 and "create it first" in err  # several inputs need an existing folder
    (tmp_path / "out2").mkdir()
    rc, _, err = run_cli(capsys, *base, "--input", str(data / "*"), "--output", tmp_path / "out2")
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "out2").iterdir() if not p.name.startswith(".")) == \
        ["a.csv", "b.csv", "c.csv"]
    assert _read(tmp_path / "out2" / "c.csv")["label"].tolist() == _read(out / "b.csv")["label"].tolist()
    rc, _, err = run_cli(capsys, *base, "--input", a, b, "--output-suffix", ".labelled.csv")
    assert rc == 0, err
    assert (data / "a.labelled.csv").exists() and (data / "b.labelled.csv").exists()
    # run again on the glob: the earlier outputs are not inputs (no a.labelled.labelled.csv)
    rc, _, err = run_cli(capsys, *base, "--input", str(data / "*.csv"), "--output-suffix", ".labelled.csv",
                         "--overwrite")
    assert rc == 0, err
    assert sorted(p.name for p in data.iterdir() if not p.name.startswith(".")) == \
        ["a.csv", "a.labelled.csv", "b.csv", "b.labelled.csv", "c.parquet"]


def test_several_inputs_resume_skips_finished_files(tmp_path, tiny_classifier):
    a, b = _write(tmp_path / "a.csv", n=20), _write(tmp_path / "b.csv", n=20)
    out = tmp_path / "out"
    out.mkdir()
    calls = []

    def die(n):
        calls.append(n)
        if len(calls) == 5:  # a (3 chunks) finished, b killed after its second chunk
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        label_files(None, [a, b], out, "review", classifier=tiny_classifier, progress=False, chunk_rows=8,
                    _after_chunk=die)
    assert (out / "a.csv").exists() and (out / "b.csv.partial").exists()
    summaries = label_files(None, [a, b], out, "review", classifier=tiny_classifier, progress=False,
                            chunk_rows=8, resume=True)
    assert [s.output for s in summaries] == [str(out / "b.csv")] and summaries[0].new_rows == 20 - 16
    for src in (a, b):
        ref = tmp_path / f"ref_{src.name}"
        label_file(None, src, ref, "review", classifier=tiny_classifier, progress=False)
        assert (out / src.name).read_bytes() == ref.read_bytes()


def test_a_file_that_fails_after_others_says_theirs_are_complete(tmp_path, tiny_classifier):
    """The error alone left the first file's output looking half-written beside a refused second one."""
    from koelectra_kit.errors import InputError

    a = _write(tmp_path / "a.csv", n=20)
    (tmp_path / "b.csv").write_text("note\n좋아요\n", encoding="utf-8")  # no text column of any usual name
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InputError, match=r"no column 'review'.*\(1 file\(s\) labelled before it are complete: "
                                         r".*a\.csv; after the fix, rerun with --resume to skip them\)"):
        label_files(None, [a, tmp_path / "b.csv"], out, "review", classifier=tiny_classifier, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [".a.csv.job.json", "a.csv"]


@pytest.mark.parametrize("flags, needle", [
    (["--shard", "0/3"], "1 <= K <= N"),
    (["--shard", "4/3"], "1 <= K <= N"),
    (["--shard", "two"], "use K/N"),
    (["--backend", "tpu"], "invalid choice"),
    (["--cache-rows", "-1"], "cache_rows=-1"),
])
def test_bad_scale_options(tmp_path, tiny_classifier_dir, capsys, flags, needle):
    src = _write(tmp_path / "in.csv", n=5)
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--no-progress", *flags)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert not (tmp_path / "o.csv").exists()


def test_bad_input_sets(tmp_path, tiny_classifier_dir, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    a, b = _write(tmp_path / "x" / "r.csv", n=3), _write(tmp_path / "y" / "r.csv", n=3)
    base = ["label", "--model", tiny_classifier_dir, "--no-progress"]
    cases = [
        (["--input", tmp_path / "none*.csv", "--output", tmp_path], "matches no file"),
        (["--input", a, b, "--output", tmp_path], "would both write"),
        (["--input", a, "--output", tmp_path / "o.csv", "--output-suffix", ".l.csv"], "contradict"),
        (["--input", a, b, "--output", tmp_path, "--plot", tmp_path / "p.png"], "one at a time"),
        (["--input", a], "output is required"),
        (["--input", a, "--output-suffix", ".labelled"], "must end with"),
        (["--input", a, "--output-suffix", "x/.labelled.csv"], "must not hold a folder"),
        (["--input", a, "--output", tmp_path / "o.csv", "--plot", tmp_path / "nope" / "p.png"], "does not exist"),
    ]
    for flags, needle in cases:
        rc, _, err = run_cli(capsys, *base, *flags)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and needle in lines[0], (flags, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x", "y"]


def test_an_existing_folder_as_output_takes_the_file_named_like_the_input(tmp_path, tiny_classifier_dir, capsys):
    """--output FOLDER without its slash, as `cp` takes it (it was "can't tell the format from the extension")."""
    src = _write(tmp_path / "in.csv", n=3)
    (tmp_path / "out").mkdir()
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "out", "--no-progress")
    assert rc == 0, err
    assert len(pd.read_csv(tmp_path / "out" / "in.csv", encoding="utf-8-sig")) == 3


# ------------------------------------------------------------------------------------------------------------
# shards
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ext, n", [(".csv", 3), (".csv", 1), (".tsv", 4), (".jsonl", 3), (".csv", 200)])
def test_shards_merge_into_the_unsharded_bytes(tmp_path, tiny_classifier, ext, n):
    src = _write(tmp_path / "in.csv")
    ref = tmp_path / f"ref{ext}"
    whole = label_file(None, src, ref, "review", classifier=tiny_classifier, progress=False, chunk_rows=4)
    out = tmp_path / f"out{ext}"
    rows = 0
    for k in range(1, n + 1):
        s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=4,
                       shard=f"{k}/{n}")
        assert s.shard == f"{k}/{n}" and s.output.endswith(f"-of-{n}{ext}")
        rows += s.rows
    assert rows == whole.rows == 94  # 90 + 2 long texts + 2 malformed lines, each one row
    merged, shards = merge_shards(out)
    assert shards == n and merged.read_bytes() == ref.read_bytes()


@pytest.fixture(scope="module")
def wider_classifier_dir(tmp_path_factory, sample_tokenizer):
    """A 128-wide, 2-layer classifier: in bf16 its scores move with the batch (the 32-wide fixture's hardly do), and
    its head is scaled up so the probabilities spread as a trained model's do (a random head gives ~1/3 each)."""
    import torch
    from transformers import ElectraConfig, ElectraForSequenceClassification

    labels = ["negative", "neutral", "positive"]
    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=sample_tokenizer.vocab_size, hidden_size=128, embedding_size=128,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=256, max_position_embeddings=64,
                        pad_token_id=0, num_labels=3, id2label=dict(enumerate(labels)),
                        label2id={l: i for i, l in enumerate(labels)})
    cfg.koelectra_kit = {"task": "text-classification", "max_length": 64, "labels": labels}
    model = ElectraForSequenceClassification(cfg).eval()
    with torch.no_grad():
        model.classifier.out_proj.weight.mul_(30)
    out = tmp_path_factory.mktemp("wide") / "clf"
    model.save_pretrained(out)
    sample_tokenizer.save(out)
    return out


# What README says label-merge gives (section "One file, N workers"). A text's scores depend slightly on the batch it
# is scored in (another padded length, other neighbours), and a shard's batches are not one run's: its chunks start
# at its own first row, and a text repeated across a shard boundary is scored again instead of copied from its first
# occurrence. So: one run's rows, order, input fields and statuses exactly; each probability within bf16's shift
# (the 3rd or 4th decimal) or fp32's (a tie at the 4th decimal's rounding, one unit at most); a label changed only
# where the two likeliest classes are that close.
MERGE_SHIFT = {"bf16": 0.01, "fp32": 0.0001}


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_merged_shards_are_one_runs_rows_with_probabilities_within_the_stated_shift(
        tmp_path, wider_classifier_dir, sample_dir, precision):
    from koelectra_kit.classify.classifier import Classifier

    clf = Classifier.load(wider_classifier_dir, device="cpu", precision=precision)
    texts = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    src = tmp_path / "in.csv"
    pd.DataFrame({"id": range(len(texts) * 2), "review": texts * 2}).to_csv(src, index=False)  # repeats too
    kw = dict(classifier=clf, progress=False, chunk_rows=64, batch_size=16)
    label_file(None, src, tmp_path / "one.csv", "review", **kw)
    for k in (1, 2, 3):
        label_file(None, src, tmp_path / "out.csv", "review", shard=f"{k}/3", **kw)
    merge_shards(tmp_path / "out.csv")
    one, merged = _read(tmp_path / "one.csv"), _read(tmp_path / "out.csv")
    assert list(merged.columns) == list(one.columns) and len(merged) == len(one) == 2 * len(texts)
    probs = [c for c in one.columns if c.startswith("prob_")]
    scores = [*probs, "confidence"]
    assert merged.drop(columns=[*scores, "label"]).equals(one.drop(columns=[*scores, "label"]))
    shift = (merged[scores].astype(float) - one[scores].astype(float)).abs().to_numpy().max()
    assert shift <= MERGE_SHIFT[precision] + 1e-9, shift  # + float noise of the 4-decimal strings' difference
    top2 = one[probs].astype(float).apply(lambda r: r.nlargest(2).to_numpy(), axis=1, result_type="expand")
    clear = (top2[0] - top2[1]) > 2 * MERGE_SHIFT[precision]
    assert clear.mean() > 0.5  # the label check below checks something
    assert (merged["label"][clear] == one["label"][clear]).all()


@pytest.mark.parametrize("ext", [".csv", ".jsonl"])
def test_a_shard_cut_short_after_labelling_is_not_merged(tmp_path, tiny_classifier, capsys, ext):
    """A shard truncated after the run (a copy from another machine that stopped half-way) would merge into an
    output missing rows without a word: refused, nothing written."""
    src = _write(tmp_path / "in.csv")
    out = tmp_path / f"out{ext}"
    for k in (1, 2):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard=f"{k}/2")
    second = tmp_path / f"out.shard-2-of-2{ext}"
    second.write_bytes(second.read_bytes()[:-40])
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and err.count("\n") == 1 and "out.shard-2-of-2" in err and "mid-line" in err
    assert not out.exists() and not out.with_name(out.name + ".merging").exists()


def test_killed_shard_resumes_without_loss(tmp_path, tiny_classifier, tiny_classifier_dir, capsys):
    src = _write(tmp_path / "in.csv")
    ref = tmp_path / "ref.csv"
    label_file(None, src, ref, "review", classifier=tiny_classifier, progress=False)
    out = tmp_path / "out.csv"

    def die(n):
        if n == 2:
            raise KeyboardInterrupt  # a kill after the shard's second chunk

    for k in (1, 3):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=5, shard=f"{k}/3")
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=5, shard="2/3",
                   _after_chunk=die)
    state = json.loads((tmp_path / "out.shard-2-of-3.csv.partial.json").read_text())
    assert state["rows_done"] == 10 and state["shard"] == "2/3"
    with open(tmp_path / "out.shard-2-of-3.csv.partial", "a", encoding="utf-8") as f:
        f.write("half,written,row\n")  # what the kill left of the third chunk
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and "shard 2 (unfinished: rerun it with --resume) of 3 missing" in err
    with pytest.raises(Exception, match="another shard"):  # the partial file is shard 2's, not shard 1's
        label_file(None, src, tmp_path / "out.shard-2-of-3.csv", "review", classifier=tiny_classifier,
                   progress=False, chunk_rows=5, resume=True)
    rc, printed, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output", out,
                               "--shard", "2/3", "--resume", "--chunk-rows", "5", "--no-progress", "--precision",
                               "fp32")
    assert rc == 0 and "(shard 2/3)" in printed, err
    rc, printed, err = run_cli(capsys, "label-merge", out)
    assert rc == 0 and "merged 3 shards" in printed, err
    assert out.read_bytes() == ref.read_bytes()
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and "--overwrite" in err
    assert run_cli(capsys, "label-merge", out, "--overwrite")[0] == 0


def test_merge_refuses_mixed_shard_counts(tmp_path, tiny_classifier, capsys):
    src = _write(tmp_path / "in.csv", n=10)
    out = tmp_path / "out.csv"
    for shard in ("1/2", "2/2", "1/3"):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard=shard)
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and "different shard counts" in err
    rc, _, err = run_cli(capsys, "label-merge", tmp_path / "nothing.csv")
    assert rc == 2 and "no shards of" in err


def test_merge_refuses_shards_of_another_job(tmp_path, tiny_classifier, capsys):
    """Shards that share an output name but were labelled from another input (same row count) or into another
    output encoding are refused, naming the shard: joined, they would be a file of two jobs' rows."""
    src, other = _write(tmp_path / "in.csv", n=10, malformed=False), tmp_path / "other.csv"
    other.write_text(src.read_text(encoding="utf-8").replace("0,", "9,", 1), encoding="utf-8")
    out = tmp_path / "out.tsv"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard="1/2")
    label_file(None, other, out, "review", classifier=tiny_classifier, progress=False, shard="2/2")
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and err.count("\n") == 1 and "out.shard-2-of-2.tsv" in err and "another input" in err, err
    assert str(other) in err and not out.exists() and not out.with_name("out.tsv.merging").exists()
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard="2/2", overwrite=True,
               output_encoding="cp949")
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and "another output encoding" in err and not out.exists(), err


def test_merge_refuses_a_shard_copied_over_another(tmp_path, tiny_classifier, capsys):
    """Shard 1's file copied over shard 3's name (an rsync or a `cp` gone wrong), with its job record or without:
    both were joined, exit 0, shard 1's rows twice and shard 3's none."""
    src = _write(tmp_path / "in.csv", n=12, malformed=False)
    out = tmp_path / "out.csv"
    for k in (1, 2, 3):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard=f"{k}/3")
    first, third = tmp_path / "out.shard-1-of-3.csv", tmp_path / "out.shard-3-of-3.csv"
    kept = third.read_bytes()
    third.write_bytes(first.read_bytes())
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and err.count("\n") == 1 and "out.shard-3-of-3.csv is not the file shard 3/3 wrote" in err, err
    assert not out.exists() and not out.with_name("out.csv.merging").exists()
    (tmp_path / "out.shard-3-of-3.csv.job.json").write_bytes((tmp_path / "out.shard-1-of-3.csv.job.json").read_bytes())
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and err.count("\n") == 1 and "holds shard 1/3, not 3/3" in err and not out.exists(), err
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard="3/3", overwrite=True)
    assert third.read_bytes() == kept
    assert run_cli(capsys, "label-merge", out)[0] == 0 and len(_read(out)) == 12


def test_merge_accepts_a_copy_of_the_input_and_shards_without_a_record(tmp_path, tiny_classifier, capsys):
    """Each machine of a cluster reads its own copy of the input (another path, another time): one job. Shards
    written before job records existed merge as before, with a warning; one shard without its record beside others
    with theirs (copied without it) is refused: cut short at a line end, it was joined, ten rows gone, exit 0."""
    src = _write(tmp_path / "in.csv", n=20)
    (tmp_path / "node2").mkdir()
    copy = tmp_path / "node2" / "in.csv"
    copy.write_bytes(src.read_bytes())
    ref = tmp_path / "ref.csv"
    label_file(None, src, ref, "review", classifier=tiny_classifier, progress=False)
    out = tmp_path / "out.csv"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard="1/2")
    label_file(None, copy, out, "review", classifier=tiny_classifier, progress=False, shard="2/2")
    job = json.loads((tmp_path / "out.shard-2-of-2.csv.job.json").read_text(encoding="utf-8"))
    assert (job["rows"], job["shard"], job["input"]) == (20, "2/2", str(copy.resolve()))
    assert run_cli(capsys, "label-merge", out)[0] == 0 and out.read_bytes() == ref.read_bytes()
    (tmp_path / "out.shard-1-of-2.csv.job.json").unlink()
    rc, _, err = run_cli(capsys, "label-merge", out, "--overwrite")
    assert rc == 2 and "out.shard-1-of-2.csv has no job record (out.shard-1-of-2.csv.job.json) while the other " \
                       "shards have theirs" in err and out.read_bytes() == ref.read_bytes()
    (tmp_path / "out.shard-2-of-2.csv.job.json").unlink()
    rc, _, err = run_cli(capsys, "label-merge", out, "--overwrite")
    assert rc == 0 and "warning: none of the shards of" in err and out.read_bytes() == ref.read_bytes()


# ------------------------------------------------------------------------------------------------------------
# inference backend
# ------------------------------------------------------------------------------------------------------------


def test_backend_flag_reaches_the_classifier(tmp_path, tiny_classifier_dir, tiny_classifier, capsys):
    from koelectra_kit.classify.onnx_backend import onnx_available

    if not onnx_available():
        pytest.skip("onnxruntime not installed (pip install 'koelectra-kit[onnx]')")
    src = _write(tmp_path / "in.csv", n=30)
    label_file(None, src, tmp_path / "torch.csv", "review", classifier=tiny_classifier, progress=False)
    base = ["label", "--model", tiny_classifier_dir, "--input", src, "--no-progress", "--precision", "fp32"]
    rc, _, err = run_cli(capsys, *base, "--output", tmp_path / "onnx.csv", "--backend", "onnx", "--chunk-rows", "8")
    assert rc == 0, err
    torch_out, onnx_out = _read(tmp_path / "torch.csv"), _read(tmp_path / "onnx.csv")
    assert onnx_out["label"].tolist() == torch_out["label"].tolist()
    assert onnx_out["status"].tolist() == torch_out["status"].tolist()
    # a run started on one engine is not resumed on the other (their probabilities differ in the 4th decimal)
    with pytest.raises(KeyboardInterrupt):
        label_file(tiny_classifier_dir, src, tmp_path / "mixed.csv", "review", progress=False, chunk_rows=8,
                   precision="fp32", _after_chunk=lambda n: (_ for _ in ()).throw(KeyboardInterrupt))
    rc, _, err = run_cli(capsys, *base, "--output", tmp_path / "mixed.csv", "--backend", "onnx", "--resume")
    assert rc == 2 and "another model" in err


def test_cpu_streams_score_like_one_batch_at_a_time(tiny_classifier, monkeypatch):
    """Batches scored side by side in threads (one intra-op thread each) give the one-at-a-time logits, in input
    order, and leave torch's thread count as it was."""
    import numpy as np
    import torch

    import koelectra_kit.classify.classifier as classifier
    from koelectra_kit.classify.classifier import cpu_streams, predict_logits

    used = []
    real_pool = classifier._stream_pool
    monkeypatch.setattr(classifier, "_stream_pool", lambda n: used.append(n) or real_pool(n))

    clf = tiny_classifier
    texts = [t * (1 + i % 5) for i, t in enumerate(TEXTS * 8)]  # many lengths, more than 4 batches a stream
    ids = clf.tok.encode_batch(texts, max_length=clf.max_length, return_offsets=False)["input_ids"]
    before = torch.get_num_threads()
    kw = dict(pad_id=clf.tok.pad_token_id, device=clf.device, dtype=clf.dtype, batch_size=4)
    one = predict_logits(clf.model, ids, streams=1, **kw)
    two = predict_logits(clf.model, ids, streams=3, **kw)
    assert torch.get_num_threads() == before and used == [3]
    # the tiny model's logits differ by ~1e-5 between texts: a row out of place would show
    assert np.allclose(one, two, rtol=0, atol=1e-7) and len({tuple(r) for r in one.round(7)}) > 10
    assert cpu_streams(clf.model, torch.device("cpu")) == before
    assert cpu_streams(clf.model, torch.device("meta")) == 1


def test_cpu_streams_change_no_thread_count_but_their_own(tiny_classifier):
    """Calls that score side by side from several threads at once (a web service's workers) give the
    one-at-a-time logits; the pool's threads run on one intra-op thread each, the calling threads keep theirs,
    and a thread started afterwards gets torch's default as it was (torch's count is per thread, with a
    process-wide default that set_num_threads also sets)."""
    import torch

    from koelectra_kit.classify.classifier import _stream_pool, predict_logits

    clf = tiny_classifier
    texts = [t * (1 + i % 5) for i, t in enumerate(TEXTS * 8)]
    ids = clf.tok.encode_batch(texts, max_length=clf.max_length, return_offsets=False)["input_ids"]
    kw = dict(pad_id=clf.tok.pad_token_id, device=clf.device, dtype=clf.dtype, batch_size=4)
    want = predict_logits(clf.model, ids, streams=1, **kw)
    outer = torch.get_num_threads()  # the test run's 1 (conftest.py)
    torch.set_num_threads(2)
    try:
        _scored_from_threads(clf, ids, kw, want)
    finally:
        torch.set_num_threads(outer)
    pool = _stream_pool(2)
    assert sorted(pool.map(lambda _: torch.get_num_threads(), range(8))) == [1] * 8


def _scored_from_threads(clf, ids, kw, want) -> None:
    """Two threads score side by side without pause; threads started meanwhile and after must see ``before``."""
    import threading

    import numpy as np
    import torch

    from koelectra_kit.classify.classifier import predict_logits

    before = torch.get_num_threads()
    got, seen, busy, stop = [], [], threading.Event(), threading.Event()

    def work():
        while not stop.is_set():
            got.append(predict_logits(clf.model, ids, streams=2, **kw))
            busy.set()

    def fresh_thread_count():  # a thread's first torch call copies torch's default count
        t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        t.start()
        t.join()

    workers = [threading.Thread(target=work) for _ in range(2)]
    for t in workers:
        t.start()
    busy.wait()
    for _ in range(20):  # while the two score (a save/restore of the count per call left 1 here, and for good)
        fresh_thread_count()
    stop.set()
    for t in workers:
        t.join()
    fresh_thread_count()
    assert seen == [before] * 21 and torch.get_num_threads() == before
    assert len(got) > 2 and all(np.allclose(g, want, rtol=0, atol=1e-7) for g in got)



def test_cpu_streams_in_a_forked_child(tiny_classifier):
    """A child forked after the pool exists (multiprocessing's default on Linux) scores side by side too: it has
    none of the parent's pool threads, so it must start its own instead of queueing work no thread takes."""
    import multiprocessing as mp

    import numpy as np
    import torch

    from koelectra_kit.classify.classifier import _stream_pool, predict_logits

    clf = tiny_classifier
    texts = [t * (1 + i % 5) for i, t in enumerate(TEXTS * 8)]
    ids = clf.tok.encode_batch(texts, max_length=clf.max_length, return_offsets=False)["input_ids"]
    kw = dict(pad_id=clf.tok.pad_token_id, device=clf.device, dtype=clf.dtype, batch_size=4)
    want = predict_logits(clf.model, ids, streams=2, **kw)
    _stream_pool(2)  # exists in the parent before the fork
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()

    def in_child():
        torch.set_num_threads(2)
        child.send(predict_logits(clf.model, ids, streams=2, **kw))

    proc = ctx.Process(target=in_child)
    proc.start()
    got = parent.recv() if parent.poll(60) else None
    proc.join(10)
    if proc.is_alive():
        proc.kill()
    assert got is not None, "the forked child's side-by-side call never finished"
    assert np.allclose(got, want, rtol=0, atol=1e-7)


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_classifier_in_a_forked_child(tiny_classifier_dir, backend):
    """A labeller forked from a process that loaded and ran a Classifier on two threads (a multiprocessing pool
    of workers sharing one loaded model) labels like its parent. It waited forever before: GNU OpenMP's threads,
    Kiwi's and onnxruntime's are not in a forked child."""
    import multiprocessing as mp

    import numpy as np
    import torch

    from koelectra_kit.classify.classifier import Classifier

    if backend == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnx")
    outer = torch.get_num_threads()
    torch.set_num_threads(2)  # the test run's 1 (conftest.py) would hide the OpenMP hang
    try:
        clf = Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32", backend=backend)
        texts = [t * (1 + i % 5) for i, t in enumerate(TEXTS * 30)]
        want = clf.predict(texts).probs
        ctx = mp.get_context("fork")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=lambda: child.send(clf.predict(texts).probs))
        proc.start()
        got = parent.recv() if parent.poll(90) else None
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    finally:
        torch.set_num_threads(outer)
    assert got is not None, "the forked child never finished labelling"
    assert np.allclose(got, want, rtol=0, atol=1e-6)


def test_xlsx_input_labels_like_its_csv_and_resumes(tmp_path, tiny_classifier):
    """An Excel workbook's first worksheet is labelled as the same table saved as CSV would be (ids as typed:
    Excel's 3.0 is 3), a killed run resumes without loss, shards merge into the same bytes, and the converted
    sheet is not left behind."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("openpyxl")
    frame = pd.DataFrame({"id": range(1, 41), "review": [TEXTS[i % len(TEXTS)] * (1 + i % 3) for i in range(40)],
                          "stars": [float(i % 5 + 1) for i in range(40)]})
    csv_src, xlsx_src = tmp_path / "in.csv", tmp_path / "in.xlsx"
    frame.assign(stars=frame.stars.astype(int)).to_csv(csv_src, index=False)
    frame.to_excel(xlsx_src, index=False)
    kw = dict(classifier=tiny_classifier, progress=False, chunk_rows=8, precision="fp32")
    label_file(None, csv_src, tmp_path / "from_csv.csv", "review", **kw)
    label_file(None, xlsx_src, tmp_path / "from_xlsx.csv", "review", **kw)
    want = (tmp_path / "from_csv.csv").read_bytes()
    assert (tmp_path / "from_xlsx.csv").read_bytes() == want

    def die(n):
        if n == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        label_file(None, xlsx_src, tmp_path / "killed.csv", "review", _after_chunk=die, **kw)
    label_file(None, xlsx_src, tmp_path / "killed.csv", "review", resume=True, **kw)
    assert (tmp_path / "killed.csv").read_bytes() == want
    for k in (1, 2, 3):
        label_file(None, xlsx_src, tmp_path / "sharded.csv", "review", shard=f"{k}/3", **kw)
    merged, _ = merge_shards(tmp_path / "sharded.csv")
    assert merged.read_bytes() == want
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".sheet.csv")]


def test_a_sharded_output_that_is_the_input_is_refused_before_any_shard(tmp_path, tiny_classifier, capsys):
    """The unsharded run refuses --output = --input; each shard's own name differs, so `--shard` took it, and
    `label-merge --overwrite` then replaced the input with the labelled file."""
    src = _write(tmp_path / "in.csv", n=10)
    before = src.read_bytes()
    rc, _, err = run_cli(capsys, "label", "--model", "x", "--input", src, "--output", src, "--shard", "1/2")
    assert rc == 2 and "--output must differ from --input" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"] and src.read_bytes() == before
    # shards made by a version that allowed it: the merge refuses to write over the input
    out = tmp_path / "out.csv"
    for k in (1, 2):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard=f"{k}/2")
    for k in (1, 2):
        record = tmp_path / f"out.shard-{k}-of-2.csv.job.json"
        job = json.loads(record.read_text(encoding="utf-8"))
        record.write_text(json.dumps({**job, "input": str(out.resolve())}), encoding="utf-8")
    out.write_bytes(before)
    rc, _, err = run_cli(capsys, "label-merge", out, "--overwrite")
    assert rc == 2 and "is the file the shards labelled" in err and out.read_bytes() == before


def test_merge_sees_an_edit_in_the_middle_of_a_large_input_or_shard(tmp_path, tiny_classifier, capsys):
    """Job records kept the input's and each shard's size and first and last MiB: a same-length edit in the middle
    of a file over 2 MiB (the input between two shard runs, or a shard before label-merge) was joined, exit 0. They
    keep the whole content's hash now; a record of an earlier version (the partial one) is still checked its way."""
    import json

    from koelectra_kit.label.resume import input_fingerprint

    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    note = "가" * 70_000  # 210 KB a row (the text column stays short): 20 rows are a 4 MiB file
    rows = [f"{i},{'재밌었어요 ㅋㅋ' if i % 2 else '별로였다'},{note}" for i in range(20)]
    src.write_text("id,review,note\n" + "\n".join(rows) + "\n", encoding="utf-8")
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard="1/2")
    data = bytearray(src.read_bytes())
    middle = data.index("가".encode(), len(data) // 2)
    data[middle:middle + 3] = "나".encode()  # one character, same length, 2 MiB from either end
    src.write_bytes(bytes(data))
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard="2/2")
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and err.count("\n") == 1 and "in.csv changed between the shard runs" in err and not out.exists(), err
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard="1/2", overwrite=True)
    shard = tmp_path / "out.shard-1-of-2.csv"
    kept = shard.read_bytes()
    edited = bytearray(kept)
    at = edited.index("가".encode(), len(edited) // 2)
    edited[at:at + 3] = "나".encode()
    shard.write_bytes(bytes(edited))
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and "out.shard-1-of-2.csv is not the file shard 1/2 wrote" in err and not out.exists(), err
    shard.write_bytes(kept)
    record = tmp_path / "out.shard-1-of-2.csv.job.json"
    job = json.loads(record.read_text(encoding="utf-8"))
    job["output_content"] = input_fingerprint(shard, mtime=False)  # as an earlier koelectra-kit wrote it
    record.write_text(json.dumps(job), encoding="utf-8")
    assert run_cli(capsys, "label-merge", out)[0] == 0 and len(_read(out)) == 20


def test_a_finished_output_of_another_job_is_not_taken_for_this_ones(tmp_path, tiny_classifier, tiny_classifier_dir,
                                                                      capsys):
    """`--resume` over many files (and `--nproc`'s ranks) skips finished outputs: a finished shard of a 10-row file
    stood for a 30-row file's (`--nproc 2 --resume` wrote 10 rows, exit 0), and a file replaced since kept its old
    output. A shard is checked against its job record, an unsharded output against its input's and model's times."""
    import os

    a, b = _write(tmp_path / "a.csv", n=10), _write(tmp_path / "b.csv", n=10)
    folder = tmp_path / "outs"
    folder.mkdir()
    args = ["label", "--model", tiny_classifier_dir, "--input", a, b, "--output", folder, "--text-column", "review",
            "--no-progress"]
    assert run_cli(capsys, *args, "--shard", "1/2")[0] == 0
    assert run_cli(capsys, *args, "--shard", "1/2", "--resume")[0] == 0  # the same job: skipped, as before
    rc, _, err = run_cli(capsys, *args, "--shard", "1/2", "--resume", "--encoding", "utf-8-sig")
    assert rc == 2 and "a.shard-1-of-2.csv is complete, but was labelled with another reading of the input" in err, err
    _write(a, n=30)  # the input replaced by a bigger file
    rc, _, err = run_cli(capsys, *args, "--shard", "1/2", "--resume")
    assert rc == 2 and "a.shard-1-of-2.csv is complete, but was labelled with another input, row count" in err, err
    assert len(_read(folder / "a.shard-1-of-2.csv")) == 5  # left as it was
    assert run_cli(capsys, *args)[0] == 0  # unsharded: each finished output has its record (.a.csv.job.json)
    later = os.stat(folder / "a.csv").st_mtime + 5
    os.utime(a, (later, later))  # touched: the same bytes, still this job's
    assert run_cli(capsys, *args, "--resume")[0] == 0
    _write(a, n=12)  # replaced after it was labelled
    rc, _, err = run_cli(capsys, *args, "--resume")
    assert rc == 2 and "a.csv is complete, but was labelled with another input than this command" in err, err
    (folder / ".a.csv.job.json").unlink()  # an output of a version that kept no record: judged by the times
    os.utime(a, (later, later))
    rc, _, err = run_cli(capsys, *args, "--resume")
    assert rc == 2 and "a.csv is complete, but its input changed after it was labelled; pass --overwrite" in err, err


def test_many_files_resume_skips_only_outputs_of_this_job(tmp_path, tiny_classifier_dir, tiny_classifier, capsys):
    """A many-file `--resume` skipped every finished output whose input and model were no newer than it: outputs a
    TF-IDF model had labelled were kept beside a new model's (exit 0), and with another text column or other human
    labels too. Each finished output of a many-file run now keeps a hidden record (.NAME.job.json) it is checked by;
    a run that writes the output again without one removes it."""
    from koelectra_kit.classify.tfidf import TfidfClassifier

    data = tmp_path / "in"
    data.mkdir()
    a = _write(data / "a.csv", n=10)
    _write(data / "b.csv", n=10)
    texts = [f"리뷰 {i} {'좋아요' if i % 2 else '별로'}" for i in range(40)]
    other = tmp_path / "tfidf"
    import numpy as np

    labels = ["negative", "neutral", "positive"]
    TfidfClassifier.fit(texts, np.array([2 if i % 2 else 0 for i in range(40)]), labels).save(other)
    out = tmp_path / "out"
    out.mkdir()
    common = ["--input", str(data / "*.csv"), "--output", out, "--text-column", "review", "--no-progress"]
    assert run_cli(capsys, "label", "--model", other, *common)[0] == 0
    record = json.loads((out / ".a.csv.job.json").read_text(encoding="utf-8"))
    assert record["input"] == str(a.resolve()) and record["output_content"].startswith("c2:")
    assert sorted(p.name for p in out.iterdir()) == [".a.csv.job.json", ".b.csv.job.json", "a.csv", "b.csv"]
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, *common, "--resume")
    assert rc == 2 and "a.csv is complete, but was labelled with another model" in err, err
    assert run_cli(capsys, "label", "--model", other, *common, "--resume")[0] == 0  # its own job: skipped
    # one file labelled again on its own, by the other model: its record says so (it was removed, and the many-file
    # --resume then kept that output by the times alone, exit 0)
    assert run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", a, "--output", out / "a.csv",
                   "--text-column", "review", "--no-progress", "--overwrite")[0] == 0
    rc, _, err = run_cli(capsys, "label", "--model", other, *common, "--resume")
    assert rc == 2 and "a.csv is complete, but was labelled with another model" in err, err
    # an output copied over (or edited, or saved again in Excel) is no longer what its record describes
    shutil.copyfile(out / "b.csv", out / "a.csv")
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, *common, "--resume")
    assert rc == 2 and "a.csv is complete, but changed since it was labelled" in err, err
    assert "delete .a.csv.job.json beside it to keep it" in err
    (out / ".a.csv.job.json").write_text("[1, 2]", encoding="utf-8")  # damaged: the way on names that one file
    rc, _, err = run_cli(capsys, "label", "--model", other, *common, "--resume")
    assert rc == 2 and ".a.csv.job.json is damaged (not a job record); delete it to keep a.csv as it is" in err, err
    (out / ".a.csv.job.json").unlink()  # kept as it is: judged by the times
    assert run_cli(capsys, "label", "--model", other, *common, "--resume")[0] == 0
    # a pattern over a folder of outputs and their records never takes a record for an input
    assert run_cli(capsys, "label", "--model", other, "--input", str(out / "*"), "--output-suffix", ".again.csv",
                   "--text-column", "review", "--no-progress")[0] == 0
    assert (out / "b.again.csv").exists() and not any(".job.again" in p.name for p in out.iterdir())


def test_a_finished_shard_resumed_alone_is_skipped(tmp_path, tiny_classifier_dir, capsys):
    """scale-out.md: "each one resumes with --resume like any run": a SLURM array resubmitted with --resume failed
    its finished tasks (a finished shard was "complete; pass --overwrite"). Skipped when its job record is this
    job's; another model's is refused."""
    src = _write(tmp_path / "in.csv", n=10)
    base = ["label", "--input", src, "--output", tmp_path / "o.csv", "--text-column", "review", "--no-progress",
            "--shard", "1/2"]
    assert run_cli(capsys, *base, "--model", tiny_classifier_dir)[0] == 0
    before = (tmp_path / "o.shard-1-of-2.csv").read_bytes()
    assert run_cli(capsys, *base, "--model", tiny_classifier_dir, "--resume")[0] == 0
    assert (tmp_path / "o.shard-1-of-2.csv").read_bytes() == before
    rc, _, err = run_cli(capsys, *base, "--model", tiny_classifier_dir, "--resume", "--precision", "fp32")
    assert rc == 2 and "is complete, but was labelled with another model" in err, err


def test_a_folder_of_files_as_input_says_to_give_a_pattern(tmp_path, tiny_classifier_dir, capsys):
    """A folder of CSV files given as --input was called "a dataset: label it in a run of its own"."""
    folder = tmp_path / "plain"
    folder.mkdir()
    _write(folder / "a.tsv", n=3)
    (tmp_path / "out").mkdir()
    for output in (tmp_path / "out", tmp_path / "x.csv"):
        rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", folder, "--output", output,
                             "--text-column", "review")
        assert rc == 2 and f"is a folder, not a dataset; to label the files in it, give a quoted pattern: --input " \
                           f"'{folder}/*.tsv'" in err, err


def test_merge_refuses_shards_read_another_way_and_names_how_a_model_was_loaded(tmp_path, tiny_classifier,
                                                                                   tiny_classifier_dir, capsys):
    """Shards of one input parsed as TSV and as CSV with a tab separator were joined (a line with a quote in two
    layouts), exit 0; shards of one model folder loaded with another --precision were refused as "another model
    (m vs m)"."""
    src = tmp_path / "in.tsv"
    src.write_text("id\treview\n" + "".join(f"{i}\t리뷰 {i} 좋아요\n" for i in range(10)), encoding="utf-8")
    out = tmp_path / "out.tsv"
    base = ["label", "--model", tiny_classifier_dir, "--input", src, "--output", out, "--text-column", "review",
            "--no-progress"]
    assert run_cli(capsys, *base, "--shard", "1/2")[0] == 0
    assert run_cli(capsys, *base, "--shard", "2/2", "--format", "csv", "--sep", "\t")[0] == 0
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and "another reading of the input (format, separator, encoding)" in err and not out.exists(), err
    assert run_cli(capsys, *base, "--shard", "2/2", "--overwrite", "--precision", "fp32")[0] == 0
    rc, _, err = run_cli(capsys, "label-merge", out)
    assert rc == 2 and "another model than" in err and "--precision fp32" in err and "--precision auto" in err, err


def test_jsonl_shards_with_a_bom_and_no_rows_merge(tmp_path, tiny_classifier):
    """More shards than rows with --output-encoding utf-8-sig: a JSONL shard of no rows is its BOM alone, which the
    merge took for a file cut short mid-line, and its advice (rerun the shard) made the same file again."""
    src = _write(tmp_path / "in.csv", n=1, malformed=False)
    ref, out = tmp_path / "ref.jsonl", tmp_path / "out.jsonl"
    label_file(None, src, ref, "review", classifier=tiny_classifier, progress=False, output_encoding="utf-8-sig")
    for k in (1, 2, 3):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard=f"{k}/3",
                   output_encoding="utf-8-sig")
    assert (tmp_path / "out.shard-1-of-3.jsonl").read_bytes() == b"\xef\xbb\xbf"
    merged, shards = merge_shards(out)
    assert shards == 3 and merged.read_bytes() == ref.read_bytes()


def test_a_shard_run_that_fails_on_a_later_file_names_the_shards_done(tmp_path, tiny_classifier):
    """Under --nproc (each rank a shard of every file), a bad second file's message called a.shard-1-of-2.csv a
    complete output: the outputs are joined only at the end, and the suggested --resume with --encoding-errors
    replace was then refused as another reading of the finished shard."""
    from koelectra_kit.errors import InputError

    a = _write(tmp_path / "a.csv", n=10)
    bad = tmp_path / "b.csv"
    bad.write_bytes("review\n".encode() + "".join(f"리뷰 {i}\n" for i in range(10)).encode() + b"\xff\xfe\n")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InputError, match=r"\(1 file\(s\) before it have this process's shard 1/2 complete: "):
        label_files(None, [a, bad], out, "review", classifier=tiny_classifier, progress=False, shard="1/2")
    summaries = label_files(None, [a, bad], out, "review", classifier=tiny_classifier, progress=False, shard="1/2",
                            resume=True, encoding_errors="replace")
    assert [s.output for s in summaries] == [str(out / "b.shard-1-of-2.csv")]  # a's finished shard skipped

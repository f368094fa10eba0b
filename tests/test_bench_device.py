"""The fine-tune and label benchmarks' --device comparisons, run here on the CPU at tiny sizes (seconds) with Kiwi
and `datasets` made unimportable, as on the GPU machine: bench_finetune.py with a preset's encoder shape prints
examples/s of the straightforward loop and the toolkit's and writes --json; bench_label.py --device trains its own
presplit=none vocabulary, times transformers' pipeline and `label` on the device and writes --json."""
from __future__ import annotations

import csv
import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_finetune  # noqa: E402
import bench_label  # noqa: E402
import bench_label_ranks  # noqa: E402
from tests.test_bad_input import assert_one_line_error  # noqa: E402

# the bench vocabularies are trained on a few hundred sample rows: fewer tokens than the 8,000 asked for
pytestmark = pytest.mark.filterwarnings("ignore:vocab_size=8000:UserWarning")


@pytest.fixture
def no_kiwi(monkeypatch):
    """kiwipiepy and datasets as on the GPU machine: not installed (an import raises ImportError)."""
    monkeypatch.setitem(sys.modules, "kiwipiepy", None)
    monkeypatch.setitem(sys.modules, "datasets", None)


def test_finetune_bench_on_a_device_with_a_preset_shape(tmp_path, monkeypatch, capsys, no_kiwi):
    monkeypatch.setattr(bench_finetune, "SHARED", tmp_path)  # no nsmc3 here: the bundled sample's rows
    out_json = tmp_path / "ft.json"
    bench_finetune.main(["--rows", "48", "--batch-size", "8", "--per-round", "2", "--shape", "tiny", "--device",
                         "cpu", "--threads", "1", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert "token cache: skipped, the `datasets` package is not installed" in out
    assert "model: 2 layers x hidden 64 (FFN 128, embedding 32)" in out and "pre-split none; device cpu" in out
    assert "acceptance:" not in out  # the reference figure is a GPU's
    figures = json.loads(out_json.read_text())
    assert figures["device"] == "cpu" and figures["batch_size"] == 8 and figures["model"]["presplit"] == "none"
    variants = figures["variants"]
    assert len(variants) == 4 and all(v["examples_per_s"] > 0 for v in variants.values())
    assert variants["straightforward: pad to max_length, fp32"]["ratio"] == 1.0


def test_finetune_bench_cuda_graphs_variants_run_the_recipes_steps(tmp_path, monkeypatch, capsys, no_kiwi):
    """--graphs on (on by default on a GPU only): cuda_graphs=true's padded step (eager on a CPU), and --compiled:
    the compiled one, beside the four others (on a CPU torch.compile's code without CUDA graphs; about a minute of
    compiling, hence extended)."""
    monkeypatch.setattr(bench_finetune, "SHARED", tmp_path)
    out_json = tmp_path / "ft.json"
    bench_finetune.main(["--rows", "32", "--batch-size", "8", "--per-round", "2", "--shape", "tiny", "--device",
                         "cpu", "--threads", "1", "--cache-rows", "0", "--graphs", "on", "--compiled",
                         "--json", str(out_json)])
    out = capsys.readouterr().out
    assert f"{bench_finetune.GRAPHS}: warm-up (recording)" in out
    assert f"{bench_finetune.COMPILED}: warm-up (recording, compiling)" in out
    variants = json.loads(out_json.read_text())["variants"]
    assert len(variants) == 6
    assert all(variants[k]["examples_per_s"] > 0 for k in (bench_finetune.GRAPHS, bench_finetune.COMPILED))


@pytest.mark.parametrize("bench,argv,message", [
    (bench_finetune, ["--model", "m", "--shape", "tiny"], "leave them out with --model"),
    (bench_finetune, ["--shape", "nope"], "--shape nope: no such YAML, preset or benchmark shape (base, "),
    (bench_finetune, ["--rows", "10"], "--rows must be at least 2 x --batch-size"),
    (bench_label, ["--device", "cpu"], "--device needs --model or --shape"),
    (bench_label, ["--device", "cpu", "--shape", "tiny", "--dup-rows", "100"], "belong to the CPU comparison"),
    (bench_label, ["--shape", "tiny", "--json", "x.json", "--model", "m"], "--json goes with --device"),
    (bench_label, ["--device", "cpu", "--shape", "tiny", "--pipeline-batches", "0"], "batch sizes >= 1"),
    (bench_label, ["--device", "cpu", "--shape", "tiny", "--sweep-rows", "0"], "a whole number >= 1"),
    (bench_label, ["--device", "cpu", "--shape", "tiny", "--sweep-rows", "x"], "a whole number >= 1"),
    (bench_label, ["--shape", "tiny", "--model", "m", "--sweep-rows", "16"], "--sweep-rows goes with --device"),
    (bench_label_ranks, ["--shape", "tiny"], "give --model, or --shape with --tokenizer"),
    (bench_label_ranks, ["--tokenizer", "t"], "give --model, or --shape with --tokenizer"),
    (bench_label_ranks, ["--model", "m", "--presplit", "none"], "--tokenizer and --presplit go with --shape"),
    (bench_label_ranks, ["--model", "m", "--ranks", "1"], "--ranks at least 2"),
    (bench_label_ranks, ["--shape", "nosuch", "--tokenizer", "."], "--shape nosuch: no such YAML, preset or "),
    (bench_label_ranks, ["--shape", "tiny", "--tokenizer", "/nonexistent"], "/nonexistent: not a model or tokenizer"),
    (bench_label_ranks, ["--model", "/nonexistent"], "/nonexistent: not a model or tokenizer folder"),
    (bench_label_ranks, ["--shape", "tiny", "--tokenizer", "TOKJSON", "--presplit", "none"],
     "has no koelectra_tokenizer.json"),
    (bench_label_ranks, ["--shape", "tiny", "--tokenizer", "TOKJSON", "--device", "gpu"], "device='gpu'"),
    (bench_label, ["--device", "cpu", "--shape", "tiny", "--tokenizer", "TOKJSON", "--presplit", "none"],
     "has no koelectra_tokenizer.json"),
])
def test_bad_options_are_one_error_line(bench, argv, message, capsys, tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")  # TOKJSON: a plain tokenizers folder (no koelectra settings)
    argv = [str(tmp_path) if a == "TOKJSON" else a for a in argv]
    with pytest.raises(SystemExit) as e:
        bench.main(argv)
    assert_one_line_error(e.value.code, capsys.readouterr().err, message)


@pytest.fixture
def sample_as_nsmc_dev(tmp_path, monkeypatch, sample_dir):
    """bench_label's DEV: nsmc3's layout, from the bundled sample."""
    dev = tmp_path / "dev.tsv"
    with open(sample_dir / "reviews_labelled.csv", encoding="utf-8") as f, open(dev, "w", encoding="utf-8") as g:
        g.write("id\tmovie_id\trating\tlabel\tdocument\n")
        for i, row in enumerate(csv.DictReader(f)):
            g.write(f"{i}\t0\t0\t{row['label']}\t{row['review'].replace(chr(9), ' ')}\n")
    monkeypatch.setattr(bench_label, "DEV", dev)
    return dev


def test_label_bench_on_a_device_needs_no_kiwi_and_no_fine_tuned_model(tmp_path, capsys, sample_as_nsmc_dev,
                                                                        no_kiwi):
    out_json = tmp_path / "label.json"
    bench_label.main(["--device", "cpu", "--shape", "tiny", "--rows", "200", "--rounds", "1", "--pipeline-batches",
                      "32,64", "--sweep-rows", "500", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert "pipeline sweep on the first 200 rows (one run each, rows/s)" in out  # more than --rows: --rows
    assert "model: random-init tiny shape" in out and "pre-split none" in out
    for row in ["(a) transformers pipeline, fp32, batch 32", "(b) koelectra-kit label, model loaded once",
                "(b) koelectra-kit label, loading the model each run"]:
        assert row in out
    assert "acceptance: label " in out and "(bar 2x)" in out
    figures = json.loads(out_json.read_text())
    assert figures["presplit"] == "none" and figures["rows"] == 200 and figures["sweep_rows"] == 200
    assert set(figures["pipeline_sweep"]) == {"fp32 batch 32", "fp32 batch 64", "bf16 batch 32", "bf16 batch 64"}
    methods = figures["methods"]
    assert methods["(a) transformers pipeline, fp32, batch 32"]["vs_a"] == 1.0
    ours = methods[figures["acceptance"]["judged"]]  # with or without dedupe: the next test
    # judged against the pipeline at its best, not its fp32 batch 32
    assert figures["acceptance"]["ratio"] == ours["vs_best_pipeline"] <= ours["vs_a"]
    assert figures["acceptance"]["ratio_fp32_batch32"] == ours["vs_a"]
    assert figures["device_name"].startswith("CPU")
    assert 0 <= figures["agreement"] <= 1


@pytest.mark.parametrize("rows, repeated", [(30, 0), (60, 30)])
def test_label_bench_judges_the_no_dedupe_run_where_the_file_repeats_texts(rows, repeated, tmp_path, capsys,
                                                                          sample_as_nsmc_dev, no_kiwi):
    """More --rows than nsmc3 dev has repeat its texts, which label answers once and the pipeline every time: the
    acceptance is then the --no-dedupe run's, the same work as the pipeline's; label's default run otherwise."""
    lines = sample_as_nsmc_dev.read_text(encoding="utf-8").splitlines()
    sample_as_nsmc_dev.write_text("\n".join(lines[:31]) + "\n", encoding="utf-8")  # the header and 30 rows
    out_json = tmp_path / "label.json"
    bench_label.main(["--device", "cpu", "--shape", "tiny", "--rows", str(rows), "--sweep-rows", "16", "--rounds", "1",
                      "--pipeline-batches", "16", "--json", str(out_json)])
    out = capsys.readouterr().out
    figures = json.loads(out_json.read_text())
    assert figures["repeated_rows"] == repeated
    judged = "(b) koelectra-kit label" + (" --no-dedupe" if repeated else "") + ", model loaded once"
    assert figures["acceptance"]["judged"] == judged
    assert figures["acceptance"]["ratio"] == figures["methods"][judged]["vs_best_pipeline"]
    assert ("acceptance: label --no-dedupe (the file repeats texts) " in out) == bool(repeated)


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_label_bench_sweeps_a_sample_says_labels_precision_and_times_labels_parts(
        precision, tmp_path, monkeypatch, capsys, sample_as_nsmc_dev, no_kiwi):
    """The pipeline's sweep on the first --sweep-rows rows, the turns on all --rows; the precision label runs at
    (bf16: Classifier.load converts the weights to bf16 and turns autocast off: it was printed as fp32); one more
    run of label cut into its parts. The precision is forced in every Classifier.load (the bench's and each
    label_file's), so the case does not depend on the CPU having bf16 (precision auto)."""
    from koelectra_kit.classify.classifier import Classifier

    load = Classifier.load.__func__
    monkeypatch.setattr(Classifier, "load", classmethod(lambda cls, *a, **k: load(cls, *a, **{**k,
                                                                                           "precision": precision})))
    out_json = tmp_path / "label.json"
    bench_label.main(["--device", "cpu", "--shape", "tiny", "--rows", "40", "--sweep-rows", "16", "--rounds", "1",
                      "--pipeline-batches", "8,16", "--json", str(out_json)])
    out = capsys.readouterr().out
    figures = json.loads(out_json.read_text())
    assert "pipeline sweep on the first 16 rows (one run each, rows/s)" in out and "40 reviews from" in out
    assert figures["sweep_rows"] == 16 and figures["rows"] == 40
    how = "bf16 weights" if precision == "bf16" else "fp32"
    assert f"agree with label's ({how}) on" in out
    assert figures["label_dtype"] == precision and figures["label_precision"] == how
    line = next(x for x in out.splitlines() if x.startswith("label's parts"))
    tokenize, model, rest, total, timed = (float(x) for x in re.search(
        r"tokenize ([\d.]+), model ([\d.]+), the rest ([\d.]+) \(read, check, dedupe, write\); total ([\d.]+) "
        r"\(the timed run's median ([\d.]+)\)", line).groups())
    assert min(tokenize, model, rest) >= 0 and model > 0 and timed > 0
    assert tokenize + model + rest == pytest.approx(total, abs=0.002)  # each printed to 3 decimals
    parts = figures["label_parts"]
    assert min(parts.values()) >= 0
    assert parts["tokenize"] + parts["model"] + parts["rest"] == pytest.approx(parts["total"])
    assert parts["timed_median"] == pytest.approx(figures["methods"]["(b) koelectra-kit label, model loaded once"][
        "seconds"][0])


@pytest.mark.parametrize("started_with", [None, "true"])
def test_label_bench_runs_label_with_tokenizers_parallelism_as_its_own_process_has_it(
        started_with, tmp_path, monkeypatch, capsys, sample_as_nsmc_dev, no_kiwi):
    """transformers' pipeline sets TOKENIZERS_PARALLELISM=false for the whole process on its first call, and
    tokenizers reads it on every call: every timed `label` run after it encoded on one core, as no `label` process
    does. Each of label's runs sees the variable as the bench started with it, each pipeline call what a pipeline's
    process has (its "false" where unset, a user's value kept)."""
    import koelectra_kit.label
    from transformers.pipelines import base

    if started_with is None:
        monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)  # (conftest sets it for the test run)
    else:
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", started_with)
    seen = {"label": [], "pipeline": []}
    label_file, run_pipeline = koelectra_kit.label.label_file, base.Pipeline.__call__

    def spy(kind, fn):
        def call(*args, **kwargs):
            seen[kind].append(os.environ.get("TOKENIZERS_PARALLELISM"))
            return fn(*args, **kwargs)
        return call

    monkeypatch.setattr(koelectra_kit.label, "label_file", spy("label", label_file))
    monkeypatch.setattr(base.Pipeline, "__call__", spy("pipeline", run_pipeline))
    bench_label.main(["--device", "cpu", "--shape", "tiny", "--rows", "40", "--sweep-rows", "16", "--rounds", "1",
                      "--pipeline-batches", "16"])
    assert "acceptance: label " in capsys.readouterr().out
    assert len(seen["label"]) >= 4 and set(seen["label"]) == {started_with}  # warm-up, three kinds, the parts
    assert len(seen["pipeline"]) >= 4 and set(seen["pipeline"]) == {started_with or "false"}
    assert os.environ.get("TOKENIZERS_PARALLELISM") == started_with


def test_nsmc_texts_reads_a_gpu_bundles_parquet_as_the_tsv(tmp_path):
    """benchmarks/common.nsmc_texts on nsmc3 train as a GPU lease's bundle holds it (Parquet: gpu_bundle.py): the
    same texts, in order, a missing one empty, --rows' limit kept."""
    import pandas as pd
    from common import nsmc_texts

    rows = [("1", "positive", "최고 ㅋㅋ"), ("2", "negative", 'a "quote"\tand tab'), ("3", "neutral", None)]
    tsv, parquet = tmp_path / "train.tsv", tmp_path / "train.parquet"
    tsv.write_text("id\tmovie_id\trating\tlabel\tdocument\n" + "".join(
        f"{i}\t0\t0\t{lab}\t{(doc or '').replace(chr(9), ' ')}\n" for i, lab, doc in rows), encoding="utf-8")
    pd.DataFrame(rows, columns=["id", "label", "document"]).to_parquet(parquet)
    assert nsmc_texts(parquet) == ["최고 ㅋㅋ", 'a "quote"\tand tab', ""]
    assert nsmc_texts(tsv) == ["최고 ㅋㅋ", 'a "quote" and tab', ""]  # (a TSV cell holds no tab)
    assert nsmc_texts(parquet, 2) == ["최고 ㅋㅋ", 'a "quote"\tand tab'] and len(nsmc_texts(tsv, 2)) == 2


def test_a_subword_presets_vocabulary_rewritten_to_presplit_none_loads_without_kiwi(tmp_path, sample_dir, no_kiwi):
    """--tokenizer TOK --presplit none (bench_label's device mode, bench_label_ranks): a Kiwi pre-split WordPiece
    vocabulary with the unknown-character fallback (a subword preset's, as the GPU bundle's) made a classifier that
    refused to load (the fallback rewrites Kiwi's pieces); with presplit none its fallback is off."""
    import pandas as pd

    from koelectra_kit.classify.classifier import Classifier

    reviews = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].astype(str).tolist()
    tok = Path(bench_label.bench_tokenizer(reviews, tmp_path / "tok"))
    settings = json.loads((tok / "koelectra_tokenizer.json").read_text(encoding="utf-8"))
    settings.update(presplit="kiwi_word", fallback="jamo_bytes")  # as a subword preset's folder says
    (tok / "koelectra_tokenizer.json").write_text(json.dumps(settings), encoding="utf-8")
    model = bench_label.random_model_like(None, "tiny", tmp_path / "model", tokenizer=str(tok), presplit="none",
                                          labels=["negative", "neutral", "positive"])
    clf = Classifier.load(model, device="cpu")
    assert clf.tok.presplit == "none" and clf.tok.fallback is None
    assert len(clf.predict(["정말 재밌어요 ㅋㅋ", "별로"]).labels) == 2

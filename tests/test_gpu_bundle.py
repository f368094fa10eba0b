"""benchmarks/gpu_bundle.py: a run cut into parts the device tool brings back (8 files of at most 16 MiB) and put
back together here, or one error line when a part is missing, cut short or altered."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import gpu_bundle  # noqa: E402

pytestmark = pytest.mark.fast


@pytest.fixture
def run(tmp_path):
    r = tmp_path / "run"
    (r / "discriminator").mkdir(parents=True)
    (r / "discriminator" / "model.safetensors").write_bytes(bytes(range(256)) * 1200)  # 300 KB
    (r / "discriminator" / "config.json").write_text("{}")
    (r / "metrics.jsonl").write_text('{"step": 1}\n')
    (r / "summary.json").write_text("{}")
    (r / "checkpoints").mkdir()
    (r / "checkpoints" / "optimizer.pt").write_bytes(b"x" * 1000)  # stays on the GPU machine
    return r


def test_a_run_comes_back_whole_from_its_parts(run, tmp_path):
    parts = gpu_bundle.pack(run, tmp_path / "OUT" / "run.tar", part_bytes=100_000)
    assert [p.name for p in parts] == [f"run.tar.{i:02d}" for i in range(len(parts))] and len(parts) == 4
    assert all(p.stat().st_size == 100_000 for p in parts[:-1])
    dest = gpu_bundle.unpack(tmp_path / "OUT" / "run.tar", tmp_path / "back")
    assert (dest / "discriminator" / "model.safetensors").read_bytes() == bytes(range(256)) * 1200
    assert sorted(p.name for p in dest.iterdir()) == ["discriminator", "metrics.jsonl", "summary.json"]


def test_packing_again_leaves_no_stale_part(run, tmp_path):
    gpu_bundle.pack(run, tmp_path / "run.tar", part_bytes=100_000)
    (run / "discriminator" / "model.safetensors").write_bytes(b"small")
    assert len(gpu_bundle.pack(run, tmp_path / "run.tar", part_bytes=100_000)) == 1
    gpu_bundle.unpack(tmp_path / "run.tar", tmp_path / "back")
    assert (tmp_path / "back" / "discriminator" / "model.safetensors").read_bytes() == b"small"


@pytest.mark.parametrize("damage,needle", [
    (lambda parts: parts[1].unlink(), "one did not come back"),
    (lambda parts: parts[-1].unlink(), "one did not come back"),
    (lambda parts: parts[2].write_bytes(parts[2].read_bytes()[:-10]), "SHA-256 differs"),
    (lambda parts: parts[0].write_bytes(b"\0" + parts[0].read_bytes()[1:]), "SHA-256 differs"),
])
def test_a_damaged_part_is_one_error_and_nothing_is_extracted(run, tmp_path, damage, needle):
    parts = gpu_bundle.pack(run, tmp_path / "run.tar", part_bytes=100_000)
    damage(parts)
    with pytest.raises(SystemExit) as e:
        gpu_bundle.unpack(tmp_path / "run.tar", tmp_path / "back")
    assert str(e.value).startswith("error: ") and needle in str(e.value)
    assert not (tmp_path / "back").exists()


def test_unpack_never_writes_into_a_folder_with_files(run, tmp_path):
    gpu_bundle.pack(run, tmp_path / "run.tar")
    (tmp_path / "back").mkdir()
    (tmp_path / "back" / "mine.txt").write_text("keep")
    with pytest.raises(SystemExit, match="not empty"):
        gpu_bundle.unpack(tmp_path / "run.tar", tmp_path / "back")
    assert (tmp_path / "back" / "mine.txt").read_text() == "keep"


def test_the_scripts_read_a_bundles_parquet_train_table(tmp_path):
    """A bundle carries nsmc3 train as parquet: the benchmarks and the experiment scripts must read it, not fall
    back to the bundled sample (bench_finetune did: another length mix, another examples/s)."""
    import os
    import subprocess

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "nsmc3").mkdir()
    (tmp_path / "nsmc3" / "train.parquet").write_bytes(b"")
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; import common; "
            "print(getattr(common, 'NSMC_TRAIN', None) or common.TRAIN)")
    for folder in ("benchmarks", "examples/experiments"):
        out = subprocess.run([sys.executable, "-c", code, str(root / folder)], capture_output=True, text=True,
                             env={**os.environ, "KOELECTRA_SHARED_DATA": str(tmp_path)}, cwd=tmp_path)
        assert out.stdout.strip() == str(tmp_path / "nsmc3" / "train.parquet"), (folder, out.stderr)
    (tmp_path / "nsmc3" / "train.tsv").write_bytes(b"")  # the shared data's own TSV wins where both exist
    out = subprocess.run([sys.executable, "-c", code, str(root / "benchmarks")], capture_output=True, text=True,
                         env={**os.environ, "KOELECTRA_SHARED_DATA": str(tmp_path)}, cwd=tmp_path)
    assert out.stdout.strip() == str(tmp_path / "nsmc3" / "train.tsv")


@pytest.fixture
def real_run(tmp_path):
    """A run whose encoder is a real transformers export (safetensors, fp32)."""
    from transformers import ElectraConfig, ElectraForPreTraining

    r = tmp_path / "real"
    cfg = ElectraConfig(vocab_size=4000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    ElectraForPreTraining(cfg).save_pretrained(r / "discriminator")
    (r / "summary.json").write_text("{}")
    return r


def test_weights_too_big_to_come_back_travel_as_bf16_and_unpack_as_fp32(real_run, tmp_path):
    """A 12 x 384 encoder is 86 MiB in fp32, more than the 64 MiB the device tool brings back: it travels rounded to
    bf16 (half the bytes) and comes back as an fp32 folder that loads, each weight its bf16 rounding."""
    import torch
    from safetensors.torch import load_file
    from transformers import ElectraForPreTraining

    model = real_run / "discriminator" / "model.safetensors"
    size = model.stat().st_size
    assert gpu_bundle.travel_weights(real_run) == "fp32"  # a small run comes back as it is
    assert gpu_bundle.travel_weights(real_run, limit=size // 2) == "bf16"  # over the bytes that come back
    assert gpu_bundle.travel_weights(real_run, part_bytes=size // 3, files=2) == "bf16"  # over the files
    fp32 = sum(p.stat().st_size for p in gpu_bundle.pack(real_run, tmp_path / "a" / "run.tar"))
    bf16 = sum(p.stat().st_size for p in gpu_bundle.pack(real_run, tmp_path / "b" / "run.tar", weights="bf16"))
    assert bf16 < 0.6 * fp32
    before = load_file(str(model))
    dest = gpu_bundle.unpack(tmp_path / "b" / "run.tar", tmp_path / "back")
    after = load_file(str(dest / "discriminator" / "model.safetensors"))
    assert after.keys() == before.keys()
    for k, t in before.items():
        assert after[k].dtype == torch.float32
        assert torch.equal(after[k], t.to(torch.bfloat16).to(torch.float32)), k
    assert any(not torch.equal(after[k], t) for k, t in before.items())  # rounded, not the fp32 values
    loaded = ElectraForPreTraining.from_pretrained(dest / "discriminator")
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    # an fp32 pack still comes back byte for byte, and unpack leaves it alone
    gpu_bundle.unpack(tmp_path / "a" / "run.tar", tmp_path / "back32")
    assert (tmp_path / "back32" / "discriminator" / "model.safetensors").read_bytes() == model.read_bytes()
    with pytest.raises(ValueError, match="fp32 or bf16"):
        gpu_bundle.pack(real_run, tmp_path / "c" / "run.tar", weights="fp16")


def test_a_fine_tune_lease_carries_its_encoder_as_fp32_when_it_fits_else_as_bf16(real_run, tmp_path, monkeypatch):
    """`gpu_bundle.py ft`: the encoder, the bundle's word list and nsmc3 as one xz tarball within what a call carries
    beside the repository; a 12 x 384 encoder (86 MiB in fp32) goes as bf16 weights, which finetune loads in fp32."""
    import tarfile

    import torch
    from safetensors import safe_open
    from transformers import AutoModelForSequenceClassification

    source = tmp_path / "bundle"
    (source / "data" / "nsmc3").mkdir(parents=True)
    (source / "data" / "nsmc3" / "dev.tsv").write_text("id\tdocument\tlabel\n1\t좋아요\t2\n", encoding="utf-8")
    (source / "corpus" / "tokenizer").mkdir(parents=True)
    (source / "corpus" / "tokenizer" / "kiwi_words.tsv").write_text("좋아요\t1 2\n", encoding="utf-8")
    encoder = real_run / "discriminator"
    weights = encoder / "model.safetensors"
    monkeypatch.setattr(gpu_bundle, "tree_bytes", lambda: 0)

    def unpacked(tarball, where):
        with tarfile.open(tarball) as tar:
            tar.extractall(where, filter="data")
        return where / tarball.name[:-len(".tar.xz")]

    fits = gpu_bundle.make_ft_bundle(encoder, tmp_path / "a" / ".gpu-ft", source)
    got = unpacked(fits, tmp_path / "x")
    assert (got / "encoder" / "model.safetensors").read_bytes() == weights.read_bytes()
    assert (got / "encoder" / "kiwi_words.tsv").is_file() and (got / "data" / "nsmc3" / "dev.tsv").is_file()
    small = gpu_bundle.make_ft_bundle(encoder, tmp_path / "b" / ".gpu-ft", source,
                                      carry_bytes=int(weights.stat().st_size * 0.8))
    got = unpacked(small, tmp_path / "y")
    with safe_open(str(got / "encoder" / "model.safetensors"), framework="pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    model = AutoModelForSequenceClassification.from_pretrained(got / "encoder", num_labels=3, dtype=torch.float32)
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # as finetune loads it
    with pytest.raises(SystemExit, match="error: .* exists"):
        gpu_bundle.make_ft_bundle(encoder, tmp_path / "b" / ".gpu-ft", source)
    with pytest.raises(SystemExit, match="not an encoder folder"):
        gpu_bundle.make_ft_bundle(source, tmp_path / "c" / ".gpu-ft", source)
    with pytest.raises(SystemExit, match="even with bf16"):
        gpu_bundle.make_ft_bundle(encoder, tmp_path / "d" / ".gpu-ft", source, carry_bytes=1000)
    assert not (tmp_path / "d" / ".gpu-ft").exists() and not (tmp_path / "d" / ".gpu-ft.tar.xz").exists()

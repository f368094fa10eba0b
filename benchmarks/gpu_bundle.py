"""What a GPU lease carries there and brings back (issue 39): the bundle, and a pretraining run packed into parts.

The device tool carries at most 64 MiB there and brings back at most 8 files of 16 MiB from $OUT. So:

- **The bundle** (`make`): the shared pretraining corpus **without nsmc3's dev texts** (they score every encoder;
  §5 of docs/RESULTS.md pretrained without them too), prepared with the GPU preset (no Kiwi needed there; a subword
  preset's tokenizer gets the word list of the nsmc3 tables, so they fine-tune there without Kiwi too), and
  nsmc3's dev table and its **whole train table as parquet** (150,000 rows: 17 MB of TSV, about 7 of parquet,
  which the label-efficiency runs need), in the shared data's layout (KOELECTRA_SHARED_DATA=BUNDLE/data).
- **A run brought back** (`pack`, `unpack`): a pretraining run's encoder, metrics and summary as one tar stream cut
  into parts of 15 MiB (`run.tar.00`, `run.tar.01`, ...) with its SHA-256 beside them (`run.tar.sha256`), and
  put back together here, checked, and extracted with tarfile's `data` filter (no links out, no absolute paths).
  An encoder whose fp32 weights would not come back (a 12 x 384 one is 86 MiB) travels with its weights rounded to
  bf16 (`travel_weights`), and `unpack` writes them back as fp32 (the rounded values, exactly).

    python benchmarks/gpu_bundle.py make .gpu                       # also: gpu_check.py --make-bundle .gpu
    python benchmarks/gpu_bundle.py unpack /work/.device/.../run.tar runs/gpu/q1
    python benchmarks/gpu_bundle.py ft runs/gpu/q1/discriminator .gpu-ft --from .gpu-sub   # a fine-tune lease's

- **A fine-tune lease's carry** (`ft`): an encoder brought back, with the bundle's word list and nsmc3 tables, as
  one xz tarball (`.gpu-ft.tar.xz`): fp32 weights when they fit the 64 MiB a call carries beside the repository,
  else rounded to bf16 (`finetune` loads an encoder in fp32 whatever it is stored in).
"""
from __future__ import annotations

import hashlib
import io
import random
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from common import ROOT, Parser, input_errors, positive_int  # noqa: E402  (benchmarks/common.py)

PART_BYTES = 15 * 2**20  # under the device tool's 16 MiB a file
CARRY_BYTES = 64 * 2**20  # what a device call carries there: the repository's tree and the carried paths together
BACK_FILES, BACK_BYTES = 8, 64 * 2**20  # what the device tool brings back from $OUT
# beside the parts: gpu_check's report, its figures, its logs' tar.gz and the parts' SHA-256 (together ~1 MiB)
BESIDE_FILES, BESIDE_BYTES = 4, 4 * 2**20
TRAVEL_KEY = "koelectra_travel"  # safetensors metadata of weights rounded for travel: the dtype they had
# what `unpack` needs to fine-tune and report on a run; checkpoints (optimizer state) and the generator stay there
RUN_FILES = ("discriminator", "metrics.jsonl", "summary.json", "config.yaml")


def kk(*args: str) -> list[str]:
    return [sys.executable, "-m", "koelectra_kit", *args]


def make_bundle(a) -> None:
    """``a.make_bundle``/: corpus/ (prepared from the corpus files minus the dev texts), data/nsmc3/train.parquet
    (every row, or a seeded ``a.bundle_rows`` of them) and dev.<ext>, and the device command that uses them."""
    from common import NSMC_DEV, NSMC_TRAIN, PRETRAIN  # noqa: E402
    from koelectra_kit.distill.data import exclusion_keys, write_without

    out = Path(a.make_bundle)
    corpus = [Path(c) for c in (a.corpus or [PRETRAIN / "nsmc_reviews.txt", PRETRAIN / "comments_mix.txt"])]
    train = Path(a.bundle_train or NSMC_TRAIN)
    dev = Path(a.bundle_dev or NSMC_DEV)
    for f in [*corpus, train, dev]:
        if not f.is_file():
            raise SystemExit(f"error: {f} not found (pass --corpus / --bundle-train / --bundle-dev)")
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "corpus" / "prepared.json").exists():
        with tempfile.TemporaryDirectory() as tmp:  # the filtered text need not travel: its ids do
            kept = Path(tmp) / "corpus-without-dev.txt"
            dropped = write_without(corpus, exclusion_keys([str(dev)], []), kept)
            print(f"corpus: {dropped:,} lines that are dev texts left out", flush=True)
            code = subprocess.run(kk("prepare", "--config", a.preset, f"corpus={kept}", f"out={out / 'corpus'}",
                                     "progress=false"), cwd=ROOT).returncode
        if code:
            raise SystemExit(code)
    tables = out / "data" / "nsmc3"  # the shared data's layout: KOELECTRA_SHARED_DATA={out}/data serves benchmarks
    tables.mkdir(parents=True, exist_ok=True)
    rows = write_parquet(train, tables / "train.parquet", a.bundle_rows)
    (tables / ("dev" + dev.suffix)).write_bytes(dev.read_bytes())
    add_word_list(out / "corpus" / "tokenizer", [tables / "train.parquet", tables / ("dev" + dev.suffix)])
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out}/: corpus/ (prepared), data/nsmc3/train.parquet ({rows:,} rows), data/nsmc3/dev{dev.suffix}; "
          f"{size / 2**20:.1f} MiB (the device tool carries 64 MiB with the repository's files)")
    print("on the GPU machine (carry it beside the repository's files), the speed check:")
    print(f"  KOELECTRA_SHARED_DATA={out}/data python benchmarks/gpu_check.py --prepared {out}/corpus "
          f"--train {tables}/train.parquet --dev {tables}/dev{dev.suffix} --out /tmp/gpu-check "
          "--report $OUT/gpu_check.txt")
    print("a quality lease (a full preset run brought back, and its fine-tunes) takes two device calls: "
          "docs/benchmarks.md, 'A quality lease'")


def add_word_list(tokenizer: Path, tables: list[Path]) -> None:
    """A Kiwi pre-split tokenizer (gpu-10min-subword) is given the cuts of the tables' words: the GPU machine has no
    kiwipiepy, and the fine-tunes and labelling there read these texts (docs/tokenizer.md, "A word list for machines
    without Kiwi"). A character tokenizer without Kiwi (gpu-10min) needs none."""
    import json

    settings = json.loads((tokenizer / "koelectra_tokenizer.json").read_text(encoding="utf-8"))
    if settings.get("presplit") not in ("kiwi", "kiwi_word"):
        return
    code = subprocess.run(kk("tokenizer", "words", f"tokenizer={tokenizer}",
                             f"input=[{','.join(map(str, tables))}]", "progress=false"), cwd=ROOT).returncode
    if code:
        raise SystemExit(code)


def write_parquet(table: Path, dest: Path, rows: int | None) -> int:
    """``table`` (read as the toolkit reads it: TSV without quoting, every cell a string) as parquet, all rows or
    a seeded sample of ``rows`` in the file's order."""
    from koelectra_kit.io.tables import read_table

    df = read_table(table)
    if rows and rows < len(df):
        keep = sorted(random.Random(0).sample(range(len(df)), rows))
        df = df.iloc[keep].reset_index(drop=True)
    df.to_parquet(dest, index=False, compression="zstd")
    return len(df)


class _Parts(io.RawIOBase):
    """A write-only stream that fills ``prefix.00``, ``prefix.01``, ... with ``part_bytes`` each."""

    def __init__(self, prefix: Path, part_bytes: int):
        self.prefix, self.part_bytes, self.paths = prefix, part_bytes, []
        self.sha, self.f, self.left = hashlib.sha256(), None, 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        view = memoryview(b)
        while view:
            if self.left == 0:
                if self.f:
                    self.f.close()
                self.paths.append(Path(f"{self.prefix}.{len(self.paths):02d}"))
                self.f, self.left = open(self.paths[-1], "wb"), self.part_bytes
            n = min(self.left, len(view))
            self.f.write(view[:n])
            self.sha.update(view[:n])
            self.left -= n
            view = view[n:]
        return len(b)

    def close(self) -> None:
        if self.f:
            self.f.close()
            self.f = None
        super().close()


def travel_weights(run: Path, part_bytes: int = PART_BYTES, files: int = BACK_FILES - BESIDE_FILES,
                   limit: int = BACK_BYTES - BESIDE_BYTES) -> str:
    """"fp32" when ``run``'s RUN_FILES come back as they are (at most ``files`` parts, ``limit`` bytes), else
    "bf16": the encoder's weights rounded for travel, half the bytes (a 12 x 384 encoder: 86 MiB in fp32)."""
    from koelectra_kit.tokenizer.wordlist import FILE as WORD_LIST

    size = sum(f.stat().st_size + 1024 for name in RUN_FILES if (run / name).exists()  # + a tar header each
               for f in ([run / name] if (run / name).is_file() else (run / name).rglob("*"))
               if f.is_file() and f.name != WORD_LIST)
    return "fp32" if -(-size // part_bytes) <= files and size <= limit else "bf16"


def _retyped(src: Path, dest: Path, frm: str, to: str, note: str | None) -> bool:
    """``src``'s safetensors with every ``frm`` tensor as ``to`` written to ``dest``; its metadata keeps ``note``
    under TRAVEL_KEY (None: drops it). Only for a file whose TRAVEL_KEY is absent (to bf16) or "float32" (back);
    False, writing nothing, for any other (a damaged file, or weights that did not travel rounded)."""
    import torch
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import save_file

    try:
        with safe_open(str(src), framework="pt") as f:
            meta = dict(f.metadata() or {})
            if meta.pop(TRAVEL_KEY, None) != (None if note else "float32"):
                return False
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (OSError, SafetensorError):
        return False
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    save_file({k: t.to(dtypes[to]) if t.dtype == dtypes[frm] else t for k, t in tensors.items()}, str(dest),
              metadata={**meta, "format": meta.get("format", "pt"), **({TRAVEL_KEY: note} if note else {})})
    return True


def pack(run: Path, prefix: Path, part_bytes: int = PART_BYTES, weights: str = "fp32") -> list[Path]:
    """``run``'s RUN_FILES as one tar stream in parts ``prefix.NN``, and ``prefix.sha256``; returns the parts. The
    encoder's word list stays behind: it is the bundle's (here already, and Kiwi is here), and its 7.8 MB would
    make a subword run's fp32 encoder five parts, one file more than the 8 that come back with the report's three.
    ``weights="bf16"``: the encoder's fp32 weights travel rounded to bf16 (``unpack`` makes them fp32 again)."""
    from koelectra_kit.tokenizer.wordlist import FILE as WORD_LIST

    if weights not in ("fp32", "bf16"):
        raise ValueError(f"weights: fp32 or bf16, not {weights!r}")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for old in prefix.parent.glob(f"{prefix.name}.[0-9][0-9]"):
        old.unlink()
    model = run / "discriminator" / "model.safetensors"
    parts = _Parts(prefix, part_bytes)
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=parts, mode="w|") as tar:
        rounded = Path(tmp) / model.name
        if weights == "bf16" and model.is_file():
            _retyped(model, rounded, "float32", "bfloat16", note="float32")

        def keep(t: tarfile.TarInfo):
            return None if Path(t.name).name == WORD_LIST or (
                rounded.exists() and t.name == "discriminator/model.safetensors") else t

        for name in RUN_FILES:
            if (run / name).exists():
                tar.add(run / name, arcname=name, filter=keep)
        if rounded.exists():
            tar.add(rounded, arcname="discriminator/model.safetensors")
    parts.close()
    Path(f"{prefix}.sha256").write_text(f"{parts.sha.hexdigest()}  {len(parts.paths)} parts\n", encoding="utf-8")
    return parts.paths


def unpack(prefix: Path, dest: Path) -> Path:
    """The parts ``prefix.NN`` put together, checked against ``prefix.sha256`` and extracted into ``dest`` (new or
    empty). One ``error:`` line (SystemExit) for a missing, cut-short or altered part."""
    parts = sorted(prefix.parent.glob(f"{prefix.name}.[0-9][0-9]"))
    sums = Path(f"{prefix}.sha256")
    if not parts or not sums.is_file():
        raise SystemExit(f"error: {prefix}: no parts {prefix.name}.00, ... with {sums.name} beside them")
    want, _, count = sums.read_text(encoding="utf-8").partition("  ")
    if len(parts) != int(count.split()[0]) or [p.name for p in parts] != [f"{prefix.name}.{i:02d}"
                                                                           for i in range(len(parts))]:
        raise SystemExit(f"error: {prefix}: {len(parts)} parts here, {count.split()[0]} packed (one did not come back)")
    data = b"".join(p.read_bytes() for p in parts)  # each part read once (a run is tens of MB)
    if hashlib.sha256(data).hexdigest() != want.strip():
        raise SystemExit(f"error: {prefix}: the parts do not add up to what was packed (SHA-256 differs)")
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"error: {dest} is not empty; unpack into a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        tar.extractall(dest, filter="data")
    restore_weights(dest / "discriminator" / "model.safetensors")
    return dest


def restore_weights(weights: Path) -> bool:
    """Weights that travelled rounded to bf16 written back in the dtype they had (fp32, the values as rounded), so
    the folder loads as any export does (transformers 5 loads a checkpoint in its stored dtype). True if it did."""
    tmp = weights.with_name(weights.name + ".fp32")
    if not _retyped(weights, tmp, "bfloat16", "float32", note=None):
        return False
    tmp.replace(weights)
    print(f"{weights}: travelled as bf16, written back as fp32 (each weight rounded to bf16's 8 bits of "
          "mantissa)", flush=True)
    return True


def make_ft_bundle(encoder: Path, out: Path, source: Path, weights: str = "auto",
                   carry_bytes: int = CARRY_BYTES) -> Path:
    """``out``.tar.xz holding ``out``/encoder (``encoder``, with ``source``'s word list) and ``out``/data
    (``source``/data: nsmc3 as the bundle has it), small enough to carry beside the repository's tree. ``weights``:
    fp32, bf16, or auto (fp32, then bf16 when the tarball would not fit). One ``error:`` line for a missing part."""
    import shutil

    from koelectra_kit.tokenizer.wordlist import FILE as WORD_LIST

    model = encoder / "model.safetensors"
    if not (encoder / "config.json").is_file() or not model.is_file():
        raise SystemExit(f"error: {encoder}: not an encoder folder (config.json + model.safetensors)")
    if not (source / "data" / "nsmc3").is_dir():
        raise SystemExit(f"error: {source}: no data/nsmc3 (make the bundle first: gpu_bundle.py make {source})")
    if weights not in ("auto", "fp32", "bf16"):
        raise SystemExit(f"error: --weights: auto, fp32 or bf16, not {weights!r}")
    if out.exists():
        raise SystemExit(f"error: {out} exists; remove it or name another folder")
    tarball = out.with_name(out.name + ".tar.xz")
    repo = tree_bytes()
    kinds = ["fp32", "bf16"] if weights == "auto" else [weights]
    if weights == "auto" and model.stat().st_size + repo > carry_bytes:  # weights hardly compress: fp32 cannot fit
        kinds = ["bf16"]
    for kind in kinds:
        shutil.copytree(encoder, out / "encoder")
        if kind == "bf16" and not _retyped(model, out / "encoder" / model.name, "float32", "bfloat16", "float32"):
            shutil.rmtree(out)
            raise SystemExit(f"error: {model}: not fp32 weights this script can round (damaged, or rounded before)")
        words = source / "corpus" / "tokenizer" / WORD_LIST  # the export leaves the word list behind: put back
        if words.is_file():
            shutil.copy(words, out / "encoder" / WORD_LIST)
        shutil.copytree(source / "data", out / "data")
        with open(tarball, "wb") as f:  # xz on both cores: Python's lzma would take one
            tar = subprocess.Popen(["tar", "-C", str(out.parent), "-cf", "-", out.name], stdout=subprocess.PIPE)
            subprocess.run(["xz", "-T2", "-6"], stdin=tar.stdout, stdout=f, check=True)
            if tar.wait() != 0:
                raise SystemExit(f"error: tar of {out} failed")
        size = tarball.stat().st_size
        print(f"{tarball}: {size / 2**20:.1f} MiB with {kind} weights; with the repository's {repo / 2**20:.1f} "
              f"MiB: {(size + repo) / 2**20:.1f} of the {carry_bytes / 2**20:.0f} MiB a call carries", flush=True)
        if size + repo <= carry_bytes:
            return tarball
        shutil.rmtree(out)
        tarball.unlink()
    raise SystemExit(f"error: {encoder} does not fit a call's {carry_bytes / 2**20:.0f} MiB even with bf16 weights")


def tree_bytes() -> int:
    """The bytes of the repository's tree as the device tool carries it: tracked files and untracked ones git does
    not ignore."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    return sum((ROOT / n).stat().st_size for n in names if n and (ROOT / n).is_file())


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)  # (each subcommand's parser is a Parser too: one error line)
    m = sub.add_parser("make", help="the folder a lease carries")
    m.add_argument("make_bundle", metavar="DIR")
    m.add_argument("--preset", default="gpu-10min")
    m.add_argument("--corpus", action="append", default=None)
    m.add_argument("--bundle-train", default=None)
    m.add_argument("--bundle-dev", default=None)
    m.add_argument("--bundle-rows", type=positive_int, default=None, help="train rows kept (seeded; default all)")
    u = sub.add_parser("unpack", help="a run brought back in parts")
    u.add_argument("prefix", type=Path, help="the parts' name without .NN (e.g. .../run.tar)")
    u.add_argument("dest", type=Path)
    f = sub.add_parser("ft", help="a fine-tune lease's carry: an encoder and the bundle's nsmc3, as OUT.tar.xz")
    f.add_argument("encoder", type=Path, help="the encoder folder (e.g. runs/gpu/q1/discriminator)")
    f.add_argument("out", type=Path, help="the folder to build (e.g. .gpu-ft); OUT.tar.xz is what travels")
    f.add_argument("--from", dest="source", type=Path, default=Path(".gpu-sub"), help="the bundle (gpu_bundle make)")
    f.add_argument("--weights", default="auto", choices=("auto", "fp32", "bf16"),
                   help="auto (fp32 if it fits, else bf16), fp32 or bf16")
    a = p.parse_args(argv)
    with input_errors(p):  # the helpers' refusals (SystemExit("error: ...")): one line, exit 2
        if a.cmd == "make":
            make_bundle(a)
        elif a.cmd == "ft":
            print(f"carry [\"{make_ft_bundle(a.encoder, a.out, a.source, a.weights)}\"]")
        else:
            print(f"unpacked into {unpack(a.prefix, a.dest)}")


if __name__ == "__main__":
    main()

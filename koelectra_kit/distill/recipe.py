"""The distillation run, top to bottom: labels, then the labelled rows and the transfer set (``setup_data``), the
teachers' probabilities on all of them (cached; ensemble weights chosen on dev), the student and its token ids, the
optimizer, a checkpoint to continue from, then one flat loop (``train``) and the student folder written as
fine-tuning writes one (``save``), published in one rename.

    result = distill(load_config(DistillConfig, None, ["teachers=[runs/sentiment,tfidf]", "transfer=reviews.txt",
                                                       "student=runs/small/discriminator", "train=train.tsv", ...]))
"""
from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..classify.classifier import attention_mask_for, collate, cpu_streams, predict_logits
from ..config import checked, dump_yaml, to_dict
from ..errors import ConfigError, InputError
from ..io.fileio import (cache_dir, make_staging_dir, publish_dir, remove_staging, write_json_atomic,
                         write_text_atomic)
from ..finetune.batching import length_grouped_batches
from ..finetune.config import absolute_path
from ..finetune.data import format_data_report, load_splits
from ..finetune.model import build_optimizer, check_finite, default_lr, load_model
from ..finetune.report import Window
from ..io.output import check_kind, check_not_input, check_out_dir, replaced_note
from ..io.trackers import Trackers, trackers_to_open
from ..finetune.tokens import encode_texts
from ..io.hfdata import check_input
from ..classify.metrics import classification_report, format_report
from ..hub.modelio import check_model_source
from ..io.scope import entry_scope
from ..runtime import (StopRequest, autocast, autocast_dtype, log, optimizer_step, quiet_transformers,
                       resolve_device, set_seed, synchronize, warn)
from . import checkpoint
from .config import NOT_TRAINING, PATH_KEYS, TFIDF, DistillConfig
from .data import exclusion_keys, format_transfer_report, load_transfer
from .teacher import check_labels, choose_weights, soften, teacher_labels, teacher_probs, texts_digest

OnStep = Callable[[int], None]


def distill_loss(logits, soft, labels, temperature: float, alpha: float):
    """(loss, kl, ce) of one batch. logits [B, k]: the student's; soft [B, k]: the teacher's probabilities at
    temperature T; labels [B]: class index, -1 for an unlabelled (transfer) row.

    loss = T^2 * mean_B KL(soft || softmax(logits / T)) + alpha * mean_labelled CE(labels, softmax(logits)).
    T^2 keeps the soft term's gradients on the scale of the hard one's as T changes (Hinton et al. 2015, sec. 2).
    """
    import torch
    import torch.nn.functional as F

    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    kl = (soft * (torch.log(soft.clamp_min(1e-12)) - logp)).sum(-1).mean()
    # the mean over labelled rows as a sum over all (unlabelled: ignored) by their count, 0 when there are none:
    # no boolean index or any() here, whose data-dependent shape or branch makes the host wait for the GPU
    ce = F.cross_entropy(logits.float(), labels, ignore_index=-1, reduction="sum") / (labels >= 0).sum().clamp_min(1)
    return temperature ** 2 * kl + alpha * ce, kl.detach(), ce.detach()


def lr_factor(progress: float, step_frac: float, warmup: float) -> float:
    """Linear warm-up over the first ``warmup`` of the budget, then linear decay to 0 at its end; ``progress``
    is the budget used (steps or minutes, whichever is further), ``step_frac`` one step's share of it."""
    if progress < warmup:
        return min(1.0, (progress + step_frac) / warmup)
    return max(0.0, (1.0 - progress) / max(1.0 - warmup, 1e-9))


class DistillRecipe:
    def __init__(self, cfg: DistillConfig, on_step: OnStep | None = None):
        self.cfg, self.on_step = cfg, on_step
        self.out = Path(cfg.out)
        check_out_dir(self.out, staged=True)
        check_not_input(self.out, {"student": cfg.student, "train": cfg.train, "dev": cfg.dev,
                                   **{f"{key}[{i}]": v for key in ("teachers", "transfer", "exclude")
                                      for i, v in enumerate(getattr(cfg, key))}})
        check_kind(self.out, "encoder")
        self.work = checkpoint.work_dir(self.out)
        checkpoint.check_work_dir(self.work, "distill")
        check_model_source(cfg.student, "student")  # before the teachers' pass, not after it
        _check_student(cfg, Path(cfg.student) / "config.json")
        for key in ("transfer", "exclude"):  # now, and named: "transfer: x.csv: file not found"
            for path in getattr(cfg, key):
                try:
                    check_input(path)  # a file, or a dataset (hf:..., a save_to_disk or Parquet folder)
                except InputError as e:
                    raise InputError(f"{key}: {e}") from None
        self.cache = cache_dir(cfg.cache_dir)
        self.report_to = trackers_to_open(cfg.report_to)  # a tracker's missing package: before any work
        self.trackers = Trackers([], self.work, {})

    # -- setup ---------------------------------------------------------------------------------

    def setup_labels(self) -> None:
        """``labels=``, else the first classifier teacher's, else fine-tuning's default set."""
        from ..finetune.config import DEFAULT_LABELS

        found = [teacher_labels(t) for t in self.cfg.teachers]
        first = next((x for x in found if x), None)
        self.labels = list(self.cfg.labels or first or DEFAULT_LABELS)
        for spec, theirs in zip(self.cfg.teachers, found):  # here, not after the teachers before it have labelled
            if theirs:
                check_labels(spec, theirs, self.labels)

    def setup_data(self) -> None:
        cfg = self.cfg
        self.splits = load_splits(cfg.data_config(self.labels))
        print(format_data_report(self.splits.report))
        keys = exclusion_keys(cfg.exclude, self.splits.dev.texts if cfg.exclude_dev else [])
        self.transfer = load_transfer(cfg.transfer, cfg.transfer_text_column, keys, cfg.max_transfer, cfg.seed)
        print(format_transfer_report(self.transfer.report))

    def setup_teachers(self) -> None:
        """Each teacher's probabilities on train + dev + transfer (cached); the ensemble's weights from dev."""
        cfg, sp = self.cfg, self.splits
        n_train, n_dev = len(sp.train.texts), len(sp.dev.texts)
        texts = sp.train.texts + sp.dev.texts + self.transfer.texts
        probs = [teacher_probs(t, texts, self.labels, sp.train, cfg, self.cache) for t in cfg.teachers]
        dev = [p[n_train:n_train + n_dev] for p in probs]
        if cfg.teacher_weights is not None:
            w, how = np.asarray(cfg.teacher_weights, dtype=np.float64) / sum(cfg.teacher_weights), "given"
        else:
            w, how = choose_weights(dev, sp.dev.y, self.labels, cfg.weight_step), f"dev grid, step {cfg.weight_step:g}"
        ensemble = sum(wi * p for wi, p in zip(w, probs))
        self.teacher_dev = {t: _short(classification_report(sp.dev.y, d.argmax(1), self.labels, scores=d))
                            for t, d in zip(cfg.teachers, dev)}
        e_dev = ensemble[n_train:n_train + n_dev]
        self.teacher_dev["ensemble"] = _short(classification_report(sp.dev.y, e_dev.argmax(1), self.labels,
                                                                    scores=e_dev))
        self.weights = {"teachers": list(cfg.teachers), "weights": [round(float(x), 4) for x in w], "from": how}
        log("teachers on dev: " + "; ".join(f"{name} macro-F1 {r['macro_f1']:.4f}" for name, r in
                                             self.teacher_dev.items()) + f" (weights {self.weights['weights']}, {how})")
        # student rows: the labelled train rows (hard label + soft), then the transfer rows (soft only)
        self.soft = soften(np.concatenate([ensemble[:n_train], ensemble[n_train + n_dev:]]), cfg.temperature)
        self.y = np.concatenate([sp.train.y, np.full(len(self.transfer.texts), -1, dtype=np.int64)])

    def setup_student(self) -> None:
        import torch

        from ..tokenizer import KoTokenizer

        cfg = self.cfg
        self.tok = KoTokenizer.from_pretrained(cfg.student)
        set_seed(cfg.seed)  # the new head's (or a random student's) initialization is part of the seeded run
        self.device = resolve_device(cfg.device)
        self.dtype = autocast_dtype(self.device, cfg.precision)
        if self.dtype == torch.float16:  # fp16 needs loss scaling, which this loop leaves out: fp32 instead
            warn("note: distill runs fp32 where fine-tuning would pick fp16 (old GPUs); bf16 is used where fast")
            self.dtype = None
        self.model, notes = load_student(cfg, self.labels)
        _check_student(cfg, self.model.config)  # (a hub student's positions, known now)
        self.model.to(self.device)
        for note in notes:
            (warn if note.startswith("warning:") else log)(note)
        cache = self.cache if cfg.token_cache else None
        texts = self.splits.train.texts + self.transfer.texts
        self.ids, _ = encode_texts(self.tok, texts, cfg.max_length, cfg.progress, "tokenizing student rows", cache)
        self.dev_ids, _ = encode_texts(self.tok, self.splits.dev.texts, cfg.max_length, cfg.progress,
                                       "tokenizing dev", cache)
        self.lengths = np.array([len(x) for x in self.ids])

    def setup_optimizer(self) -> None:
        cfg = self.cfg
        self.lr = cfg.lr or default_lr(self.model)
        self.optimizer = build_optimizer(self.model, self.lr, cfg.layer_decay, cfg.weight_decay, cfg.adam_eps,
                                         self.device)  # fine-tuning's: fused on a GPU
        self.base_lrs = [g["lr"] for g in self.optimizer.param_groups]
        self.steps_per_epoch = math.ceil(len(self.ids) / cfg.batch_size)
        self.total_steps = max(1, math.ceil(cfg.epochs * self.steps_per_epoch))
        per_epoch = min(4, max(1, int(0.3 * len(self.ids) / max(len(self.dev_ids), 1))))
        self.eval_every = cfg.eval_every or max(1, self.steps_per_epoch // per_epoch)
        self.multiple = 8 if self.device.type == "cuda" else 1

    def setup_resume(self) -> None:
        """Continue from OUT.work's checkpoint when there is one of this very run (settings, teachers' soft
        labels, texts); else start over in a fresh OUT.work."""
        import hashlib
        import json

        cfg = self.cfg
        # paths compared as absolute ones: out=dk and out=$PWD/dk, or train=a.csv run from its folder and from above,
        # are one run (a key of the paths as typed refused its own resume)
        settings = {k: ([absolute_path(x) for x in v] if isinstance(v, list) else absolute_path(v))
                    if k in PATH_KEYS else v for k, v in to_dict(cfg).items() if k not in NOT_TRAINING}
        h = hashlib.blake2b(digest_size=16)
        h.update(json.dumps(settings, sort_keys=True).encode() + self.soft.tobytes())
        dev, texts = texts_digest(self.splits.dev.texts), texts_digest(self.splits.train.texts + self.transfer.texts)
        h.update(dev.encode())
        h.update(texts.encode())
        self.run_key = h.hexdigest()
        # the parts, so that a refused resume can say which one changed
        self.run_parts = {"settings": json.loads(json.dumps(settings, default=str)), "dev": dev, "texts": texts,
                          "soft": hashlib.blake2b(self.soft.tobytes(), digest_size=16).hexdigest()}
        self.progress = (checkpoint.load(self.work, self.model, self.optimizer, self.run_key, self.run_parts)
                         if cfg.resume else None)
        if self.progress is None:
            checkpoint.clear_work(self.work)
            self.progress = checkpoint.Progress()
        else:
            log(f"resumed from {self.work} at step {self.progress.step} of {self.total_steps}")
        checkpoint.rows_until(self.work / "metrics.jsonl", self.progress.step)  # a killed run's later rows (and a
        # line the kill cut short) go

    # -- train ----------------------------------------------------------------------------------

    def evaluate(self, metrics) -> None:
        p = self.progress
        t = time.perf_counter()
        logits = predict_logits(self.model, self.dev_ids, pad_id=self.tok.pad_token_id, device=self.device,
                                dtype=self.dtype, batch_size=self.cfg.eval_batch_size, multiple=self.multiple,
                                streams=cpu_streams(self.model, self.device))  # as `label` scores
        rep = classification_report(self.splits.dev.y, logits.argmax(1), self.labels)
        self.evaluated_at = p.step
        p.eval_time += time.perf_counter() - t
        self.log_row(metrics, {"kind": "eval", "step": p.step, "accuracy": rep["accuracy"], "macro_f1": rep["macro_f1"]})
        if rep["macro_f1"] > p.best_f1:
            p.best_f1, p.best_step, p.best_logits = rep["macro_f1"], p.step, logits
            p.best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def train(self) -> None:
        """Epochs of length-grouped batches until the step or time budget is used: a loss row every log_every
        steps, dev every eval_every (and at the end), a checkpoint every save_every steps / minutes."""
        import torch
        from tqdm.auto import tqdm

        cfg, p, model = self.cfg, self.progress, self.model
        soft, y = torch.from_numpy(self.soft), torch.from_numpy(self.y)
        last_save = time.perf_counter()
        self.evaluated_at = -1
        pin = self.device.type == "cuda"
        window = Window()  # this train row's steps: [loss, kl, ce] tensors where they were computed
        # Ctrl-C or SIGTERM (a scheduler's): the step ends and is checkpointed, and the same command continues it
        stop = StopRequest(what="distillation")
        with stop, open(self.work / "metrics.jsonl", "a", encoding="utf-8", buffering=1) as metrics, \
                tqdm(total=self.total_steps, initial=p.step, desc="distilling", unit="step", disable=not cfg.progress,
                     dynamic_ncols=True) as bar:
            while self.budget_used() < 1.0:
                erng = np.random.default_rng([cfg.seed, p.epoch])  # an epoch's order: a function of (seed, epoch)
                batches = length_grouped_batches(self.lengths, cfg.batch_size, erng)
                for idx in batches[p.batch:]:
                    if self.budget_used() >= 1.0:
                        break
                    factor = lr_factor(self.budget_used(), 1 / self.total_steps, cfg.warmup_ratio)
                    for g, base in zip(self.optimizer.param_groups, self.base_lrs):
                        g["lr"] = base * factor
                    t = time.perf_counter()
                    model.train()
                    # built in pinned memory on a GPU and copied without the host waiting (fine-tuning's batches)
                    ids, mask = collate(self.ids, idx, self.tok.pad_token_id, self.multiple, pin=pin)
                    rows = torch.from_numpy(idx)
                    soft_b, y_b = (x[rows].pin_memory() if pin else x[rows] for x in (soft, y))
                    ids, mask, soft_b, y_b = (x.to(self.device, non_blocking=True) for x in (ids, mask, soft_b, y_b))
                    with autocast(self.device, self.dtype):
                        logits = model(input_ids=ids, attention_mask=attention_mask_for(model, mask)).logits
                    loss, kl, ce = distill_loss(logits, soft_b, y_b, cfg.temperature, cfg.alpha)
                    loss.backward()
                    if cfg.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer_step(self.optimizer)
                    p.step, p.batch, p.examples = p.step + 1, p.batch + 1, p.examples + len(idx)
                    window.add(torch.stack([loss.detach(), kl, ce]), len(idx))  # read back once a train row
                    bar.update(1)
                    log_now, eval_now = p.step % cfg.log_every == 0, p.step % self.eval_every == 0
                    # the step that reads waits for the GPU's queued steps: their time counts as training time
                    means = window.mean_loss() if log_now else None
                    if eval_now and not log_now:
                        synchronize(self.device)
                    p.train_time += time.perf_counter() - t
                    if log_now:
                        loss_, kl_, ce_ = means
                        self.log_row(metrics, {"kind": "train", "step": p.step, "loss": loss_, "kl": kl_, "ce": ce_,
                                               "lr": self.lr * factor, "elapsed_s": round(p.train_time, 2)})
                        bar.set_postfix(loss=f"{loss_:.4f}", best=f"{p.best_f1:.3f}")
                        window = Window()
                    if eval_now:
                        self.evaluate(metrics)
                    due = cfg.save_every and p.step % cfg.save_every == 0
                    since = time.perf_counter() - last_save
                    if due or (cfg.save_every_minutes and since >= 60 * cfg.save_every_minutes):
                        checkpoint.save(self.work, model, self.optimizer, p, self.run_key, self.run_parts)
                        last_save = time.perf_counter()
                    if self.on_step is not None:
                        self.on_step(p.step)
                    if stop.requested:
                        checkpoint.save(self.work, model, self.optimizer, p, self.run_key, self.run_parts)
                        warn(f"interrupted at step {p.step}: checkpointed in {self.work}; the same command continues")
                        raise KeyboardInterrupt
                else:
                    p.epoch, p.batch = p.epoch + 1, 0
            if self.evaluated_at != p.step or p.best_state is None:
                self.evaluate(metrics)  # the end of the budget is always evaluated

    def log_row(self, metrics, row: dict) -> None:
        """A metrics.jsonl row, and the same row to the run's trackers (report_to)."""
        _write_row(metrics, row)
        self.trackers.log(row, row["kind"])

    def budget_used(self) -> float:
        p, cfg = self.progress, self.cfg
        used = p.step / self.total_steps
        return max(used, p.train_time / (60 * cfg.max_minutes)) if cfg.max_minutes > 0 else used

    # -- output ---------------------------------------------------------------------------------

    def save(self, staging: Path) -> dict:
        """The best checkpoint + tokenizer, eval.json, data_report.json, distill_config.yaml, metrics.jsonl."""
        import torch

        from ..tokenizer.saving import vocab_digest

        cfg, p, model = self.cfg, self.progress, self.model
        model.load_state_dict(p.best_state)
        check_finite(model, "the distillation")
        model.config.koelectra_kit = {"task": "text-classification", "max_length": cfg.max_length,
                                      "labels": self.labels, "source_model": cfg.student, "init": cfg.init,
                                      "distilled_from": list(cfg.teachers), "vocab_digest": vocab_digest(self.tok)}
        with quiet_transformers():
            model.save_pretrained(staging)
        self.tok.save(staging)
        sp = self.splits
        self.report = report = classification_report(sp.dev.y, p.best_logits.argmax(1), self.labels,
                                                     scores=p.best_logits)
        n_params = sum(x.numel() for x in model.parameters())
        result = {
            "model": f"{type(model).__name__} from {cfg.student}, distilled from {', '.join(cfg.teachers)}",
            "dev": report, "best": {"step": p.best_step, "epoch": round(p.best_step / self.steps_per_epoch, 3)},
            "train": {"rows": len(self.ids), "labelled_rows": len(sp.train.y),
                      "transfer_rows": len(self.transfer.texts),
                      "steps": p.step, "epochs": round(p.step / self.steps_per_epoch, 3),
                      "train_time_s": round(p.train_time, 2), "eval_time_s": round(p.eval_time, 2),
                      "examples_per_s": round(p.examples / max(p.train_time, 1e-9), 1), "device": str(self.device),
                      "threads": torch.get_num_threads(), "lr": self.lr, "parameters": n_params},
            "distill": {**self.weights, "temperature": cfg.temperature, "alpha": cfg.alpha,
                        "teacher_dev": self.teacher_dev, "transfer": self.transfer.report},
        }
        if cfg.references:
            from ..classify.references import reference_scores

            result["references"] = reference_scores(sp.train.texts, sp.train.y, sp.dev.texts, sp.dev.y, self.labels,
                                                    cfg.baseline)
        write_json_atomic(staging / "eval.json", result)
        write_json_atomic(staging / "data_report.json", {**sp.report, "transfer": self.transfer.report})
        write_text_atomic(staging / "distill_config.yaml", dump_yaml(cfg))
        checkpoint.publish_work_files(self.work, staging)  # metrics.jsonl, report_to's files, as fine-tuning's
        if cfg.plots:
            from ..io.plots import plot_confusion

            plot_confusion(report, staging / "confusion.png")
        return result

    def run(self) -> dict:
        fd = checkpoint.hold_work(self.work, self.out)  # one run at a time for this out=
        try:
            return self._run()
        finally:
            checkpoint.release_work(self.work, fd, done=False)  # (a finished run removed it unless keep_work)

    def _run(self) -> dict:
        for step in (self.setup_labels, self.setup_data, self.setup_teachers, self.setup_student,
                     self.setup_optimizer, self.setup_resume):
            step()
        log(f"student: {len(self.ids):,} rows ({len(self.splits.train.y):,} labelled), {self.total_steps} steps, "
            f"T={self.cfg.temperature:g}, alpha={self.cfg.alpha:g}, lr {self.lr:g}, dev every {self.eval_every} steps")
        # opened last (wandb takes seconds to start); a resumed run's TensorBoard files continue at its step
        with Trackers(self.report_to, self.work, to_dict(self.cfg), name=self.out.resolve().name,
                      start_step=self.progress.step) as self.trackers:
            self.train()
        # a failed save below can be retried from here without training again
        checkpoint.save(self.work, self.model, self.optimizer, self.progress, self.run_key, self.run_parts)
        staging = make_staging_dir(self.out)
        try:
            result = self.save(staging)
            replaced = replaced_note(self.out)
            publish_dir(staging, self.out)
        finally:
            remove_staging(staging)
        if replaced:
            log(replaced)
        if not self.cfg.keep_work:
            shutil.rmtree(self.work, ignore_errors=True)
        print(format_report(self.report, title=f"student dev (best step {self.progress.best_step} of "
                                                f"{self.progress.step})"))
        if "references" in result:
            from ..classify.references import format_references

            print(format_references(self.report, {**result["references"], "teacher": {
                "name": "teacher ensemble", **self.teacher_dev["ensemble"]}}))
        log(f"wrote {self.out}/ (model, eval.json, data_report.json, metrics.jsonl)")
        return result


def _short(report: dict) -> dict:
    keep = {k: report[k] for k in ("accuracy", "macro_f1")}
    return {**keep, **({"binary_accuracy": report["binary"]["accuracy"]} if "binary" in report else {})}


def _write_row(f, row: dict) -> None:
    import json

    f.write(json.dumps(row) + "\n")


MAX_STUDENT_PARAMS = 2_000_000_000  # a random-init student of student_shape: at most this many weights


def _check_student(cfg: DistillConfig, config) -> None:
    """What would fail only after the whole teachers' pass, said before it (``config``: the student's config.json
    path, or its loaded config): max_length within its position embeddings (the first training step crashed), and a
    ``student_shape`` whose heads divide its width."""
    if isinstance(config, Path):
        try:
            config = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # a hub id, or no config here: checked once the student is loaded
    get = config.get if isinstance(config, dict) else lambda key: getattr(config, key, None)
    positions = get("max_position_embeddings")
    if isinstance(positions, int) and cfg.max_length > positions:
        raise ConfigError(f"max_length={cfg.max_length} exceeds the student's max_position_embeddings={positions}; "
                          f"give max_length={positions} or less")
    hidden, heads = (cfg.student_shape.get(k, get(k)) for k in ("hidden_size", "num_attention_heads"))
    if isinstance(hidden, int) and isinstance(heads, int) and heads and hidden % heads:
        raise ConfigError(f"student_shape: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    if cfg.student_shape:
        # hidden_size=1000000 was torch's 4 TB allocation traceback, num_hidden_layers=10**12 a hang building the
        # layers, both after the teachers' pass: the shape's weights counted first
        shape = {k: cfg.student_shape.get(k, get(k)) for k in
                 ("vocab_size", "max_position_embeddings", "embedding_size", "hidden_size", "num_hidden_layers",
                  "intermediate_size")}
        shape["embedding_size"] = shape["embedding_size"] or shape["hidden_size"]  # (BERT: no factorized table)
        if all(isinstance(v, int) for v in shape.values()):
            e, h, i = shape["embedding_size"], shape["hidden_size"], shape["intermediate_size"]
            params = ((shape["vocab_size"] + shape["max_position_embeddings"]) * e + e * h
                      + shape["num_hidden_layers"] * (4 * h * h + 2 * h * i))
            if params > MAX_STUDENT_PARAMS:
                raise ConfigError(f"student_shape {cfg.student_shape}: a student of ~{params:.2g} parameters (more "
                                  f"than {MAX_STUDENT_PARAMS:.0e}, ELECTRA-large is 3.4e+08); a student is smaller than "
                                  "its teachers, e.g. {num_hidden_layers: 4}")


def load_student(cfg: DistillConfig, labels: list[str]):
    """(model, notes): the student encoder with a classification head for ``labels``; with ``student_shape``, a
    random-init model of that shape (the student folder's config otherwise)."""
    if not cfg.student_shape:
        return load_model(cfg.data_config(labels), labels)
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from ..hub.modelio import loading

    name = check_model_source(cfg.student, "student")
    with loading(name, "student"), quiet_transformers():
        config = AutoConfig.from_pretrained(name, num_labels=len(labels), id2label=dict(enumerate(labels)),
                                            label2id={lab: i for i, lab in enumerate(labels)},
                                            problem_type="single_label_classification", trust_remote_code=False)
    for k, v in cfg.student_shape.items():
        setattr(config, k, v)
    _check_student(cfg, config)  # before from_config, which refuses heads that do not divide the width its own way
    model = AutoModelForSequenceClassification.from_config(config, trust_remote_code=False)
    return model, [f"random-init student of shape {cfg.student_shape} ({name}'s vocabulary)"]


def distill(cfg: DistillConfig | dict, on_step: OnStep | None = None) -> dict:
    """Label, distill, write ``cfg.out``; returns eval.json's dict. ``cfg``: a DistillConfig or a dict of its keys,
    validated as ``load_config`` validates. ``on_step(step)`` runs after every optimizer step (tests stop a run
    there, as a kill would). Ctrl-C or SIGTERM checkpoints the step in OUT.work and raises KeyboardInterrupt (the
    same call continues the run)."""
    cfg = checked(cfg, DistillConfig, "distill")
    with entry_scope():
        return DistillRecipe(cfg, on_step).run()


__all__ = ["DistillRecipe", "distill", "distill_loss", "lr_factor", "load_student", "TFIDF"]

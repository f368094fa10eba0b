"""The fine-tuning run, top to bottom: ``setup_model`` (tokenizer and model first, so a wrong model path fails
in a second, not after reading the data), ``setup_data``, ``setup_optimizer``, ``setup_resume`` (a killed run's
checkpoint in OUT.work, when there is one of this very run), ``train`` (one flat loop with a dev ``evaluate`` every
N steps, early stopping, the best checkpoint kept in memory and the run checkpointed every few minutes), ``save``
(the best checkpoint and its reports into a staging folder), then the folder published in one rename.

    result = finetune(load_config(FinetuneConfig, "sentiment", ["model=DIR", "train=a.csv", "out=runs/s"]))
"""
from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..classify.classifier import collate, cpu_streams, predict_logits
from ..config import checked, dump_yaml, to_dict
from ..errors import ConfigError, Interrupted
from ..io.fileio import (cache_dir, make_staging_dir, publish_dir, remove_staging, write_json_atomic,
                         write_text_atomic)
from ..io.trackers import Trackers, trackers_to_open
from ..classify.metrics import classification_report, cross_entropy, format_report
from ..hub.modelio import check_model_source
from ..io.scope import entry_scope
from ..runtime import (StopRequest, autocast_dtype, log, pad_multiple, precision_name,
                       quiet_transformers, resolve_device, set_seed, synchronize, warn)
from . import checkpoint
from .batching import length_grouped_batches, shuffled_batches
from .checkpoint import RunState
from .companions import add_companions, fit_in_background, tfidf_job
from .config import RESUMABLE, FinetuneConfig, with_absolute_paths
from .data import format_data_report, load_splits
from .graphs import GraphedStep, wants_graphs
from .model import build_optimizer, check_finite, compile_model, default_layer_decay, default_lr, load_model
from .report import MetricsLog, Window
from .step import train_step
from ..io.output import check_kind, check_not_input, check_out_dir, replaced_note
from .tokens import encode_texts


# The auto schedule of a small set (epochs: null, min_steps raised it): about 20 dev evaluations over the run, early
# stopping after 5 in a row without a better macro-F1 (a quarter of the run).
AUTO_EPOCHS, AUTO_EVALS, AUTO_PATIENCE = 3.0, 20, 5


def schedule_epochs(epochs: float | None, min_steps: int, steps_per_epoch: int) -> tuple[float, bool]:
    """(epochs to run, whether min_steps raised them). Given epochs are run as given; auto is 3 epochs or
    ``min_steps`` optimizer steps, whichever is more."""
    if epochs is not None:
        return float(epochs), False
    floor = min_steps / max(steps_per_epoch, 1)
    return (floor, True) if floor > AUTO_EPOCHS else (AUTO_EPOCHS, False)


def _background_fit(device, job, graphs: bool = True) -> bool:
    """Whether the run's TF-IDF fit (``job``: ``tfidf_job``'s, None when the run needs none) runs in a thread while
    the model trains. On a CUDA GPU with the step as one CUDA graph (``graphs``): the fit is pure CPU work that took
    37 s on 150,000 rows (one core) after training, and that loop leaves the host nearly idle (one launch a step).
    Not for an eager GPU loop: there the host issuing kernels is the step, and the fit's Python (the vectorizer)
    would take the interpreter from it. Not on a CPU: the thread and torch's threads would share the same cores.
    Otherwise the fit runs after training as it always did."""
    return job is not None and device.type == "cuda" and graphs


class FinetuneRecipe:
    """One run of ``cfg``: ``run()`` calls the steps below in order; each step names what it sets up."""

    def __init__(self, cfg: FinetuneConfig, on_step: Callable[[int], None] | None = None):
        for key in ("model", "out"):
            if not getattr(cfg, key):
                raise ConfigError(f"{key}= is required")
        self.cfg, self.on_step = cfg, on_step  # on_step(step): after every step (tests stop a run there, as a kill)
        self.out = Path(cfg.out)
        check_out_dir(self.out, staged=True)
        check_not_input(self.out, {"model": cfg.model, "train": cfg.train, "dev": cfg.dev})
        check_kind(self.out, "encoder", writes=("tfidf", "ensemble") if cfg.ensemble == "tfidf" else ())
        self.work = checkpoint.work_dir(self.out)  # checkpoints, metrics and trackers' files while the run lasts
        checkpoint.check_work_dir(self.work, "fine-tuning")
        self.report_to = trackers_to_open(cfg.report_to)  # a tracker's missing package: before any work
        self.labels = list(cfg.labels)
        self.state = RunState()
        self.staging: Path | None = None
        self.work_fd: int | None = None  # OUT.work's hold while the run lives
        self.checkpointed: int | None = None  # the step of OUT.work's checkpoint of this run, once there is one
        self.kept_rows: list[dict] = []  # a resumed run's metrics rows up to its checkpoint
        self.candidates: dict | None = None  # with ensemble=tfidf: the three folders' dev scores and the best
        self.tfidf_future = None  # on a GPU: the TF-IDF fit running beside training (run, _background_fit)
        self.metrics: MetricsLog | None = None
        self.bar = None
        self.stop_signal: str | None = None  # what stopped training early: SIGINT (Ctrl-C, KeyboardInterrupt), SIGTERM

    # -- setup ---------------------------------------------------------------------------------

    def setup_model(self) -> None:
        from ..tokenizer import KoTokenizer
        from ..tokenizer.saving import check_model_vocab

        cfg = self.cfg
        self.device = resolve_device(cfg.device)  # device=cuda without a GPU: said first
        check_model_source(cfg.model)  # a mistyped path is named as such, before the tokenizer looks for it
        self.tok = KoTokenizer.from_pretrained(cfg.model)
        set_seed(cfg.seed)  # the new head's initialization is part of the seeded run
        self.dtype = autocast_dtype(self.device, cfg.precision)
        self.model, self.notes = load_model(cfg, self.labels)
        check_model_vocab(self.tok, self.model.config, self.model.get_input_embeddings().num_embeddings,
                          f"model={cfg.model}")
        self.model.to(self.device)
        max_pos = getattr(self.model.config, "max_position_embeddings", None)
        if max_pos and cfg.max_length > max_pos:
            raise ConfigError(f"max_length={cfg.max_length} exceeds the model's max_position_embeddings={max_pos}")
        # Lengths rounded up to a multiple (16 on a GPU): few batch shapes, each compiled once with compile=true.
        self.multiple = pad_multiple(self.device, cfg.pad_to_multiple_of)
        self.graphs = wants_graphs(cfg.cuda_graphs, self.device, self.dtype, cfg.compile)  # auto: on a GPU
        if self.graphs:
            if self.device.type != "cuda":
                raise ConfigError(f"cuda_graphs=true needs a CUDA GPU; this run is on {self.device.type} (device=cuda, "
                                  "or leave cuda_graphs out)")
            if self.precision_name == "float16":  # precision=auto on a GPU without bf16
                raise ConfigError("cuda_graphs=true: this GPU has no bf16 and fp16 needs a loss scaler that reads the "
                                  "host; add precision=fp32")
            self.multiple = cfg.max_length  # the graph's one batch shape: every batch max_length wide
        self.pin = self.device.type == "cuda"  # batches built in pinned memory, copied without waiting
        if cfg.compile:
            compile_model(self.model, cfg.compile_mode, shapes=4 * math.ceil(cfg.max_length / self.multiple))

    def setup_data(self) -> None:
        """Rows (reported), then their tokens: encoded once, read from the token cache when it has them."""
        from ..tokenizer.unknown import count_unknown, unk_report

        cfg = self.cfg
        self.splits = load_splits(cfg)
        t0 = time.perf_counter()
        cache = cache_dir(cfg.cache_dir) if cfg.token_cache else None
        self.train_ids, train_trunc = encode_texts(self.tok, self.splits.train.texts, cfg.max_length, cfg.progress,
                                                   "tokenizing train", cache)
        self.dev_ids, dev_trunc = encode_texts(self.tok, self.splits.dev.texts, cfg.max_length, cfg.progress,
                                               "tokenizing dev", cache)
        self.tokenize_s = time.perf_counter() - t0
        self.lengths = np.array([len(x) for x in self.train_ids])
        unknown, tokens = count_unknown(self.train_ids + self.dev_ids, self.tok.unk_token_id, 2)  # (no [CLS]/[SEP])
        self.splits.report["tokens"] = {
            "median": int(np.median(self.lengths)), "p95": int(np.percentile(self.lengths, 95)),
            "max": int(self.lengths.max()), "max_length": cfg.max_length,
            "truncated_train": int(train_trunc.sum()), "truncated_dev": int(dev_trunc.sum()),
            "unk_rate": round(unknown / max(tokens, 1), 4),
            "unk_warning": unk_report(self.tok, unknown, tokens, "the train and dev texts")}
        print(format_data_report(self.splits.report))

    def setup_optimizer(self) -> None:
        """AdamW with layer-wise lr decay; linear warm-up then linear decay to 0; the evaluation interval."""
        import torch

        cfg, model, device = self.cfg, self.model, self.device
        self.lr = cfg.lr or default_lr(model)
        self.layer_decay = cfg.layer_decay if cfg.layer_decay is not None else default_layer_decay(model)
        self.optimizer = build_optimizer(model, self.lr, self.layer_decay, cfg.weight_decay, cfg.adam_eps, device)
        self.steps_per_epoch = math.ceil(len(self.train_ids) / cfg.batch_size)
        self.epochs, floored = schedule_epochs(cfg.epochs, cfg.min_steps, self.steps_per_epoch)
        total = self.total_steps = max(1, math.ceil(self.epochs * self.steps_per_epoch))
        self.patience = cfg.patience if cfg.patience is not None else (AUTO_PATIENCE if floored else 0)
        warmup = int(cfg.warmup_ratio * total)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda s: (s + 1) / warmup if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
        # auto: up to 4 dev evaluations per epoch, fewer when dev is large next to train, so that
        # evaluation (forward only, ~1/3 of a training step per row) stays within ~10% of training time
        evals_per_epoch = min(4, max(1, int(0.3 * len(self.train_ids) / max(len(self.dev_ids), 1))))
        auto_every = total // AUTO_EVALS if floored else self.steps_per_epoch // evals_per_epoch
        self.eval_every = cfg.eval_every or max(1, auto_every)
        self.class_weights = None
        if cfg.class_weights == "balanced":
            counts = np.bincount(self.splits.train.y, minlength=len(self.labels))
            self.class_weights = torch.tensor(len(self.splits.train.y) / (len(self.labels) * counts),
                                              dtype=torch.float32, device=device)
        self.scaler = torch.amp.GradScaler(device.type) if self.dtype == torch.float16 else None
        # evaluation is forward only under inference_mode: a GPU takes bigger batches than training's
        self.eval_batch_size = cfg.eval_batch_size or (512 if device.type == "cuda" else 128)
        self.n_params = sum(p.numel() for p in model.parameters())
        for note in self.notes:
            (warn if note.startswith("warning:") else log)(note)
        log(f"model: {type(model).__name__} {self.n_params / 1e6:.2f}M parameters on {device} "
            f"({self.precision_name}{', compiled' if cfg.compile else ''}"
            f"{', CUDA graphs' if self.graphs else ''}); "
            f"lr {self.lr:g} (top), layer decay "
            # initial_lr, the peak: the scheduler has already put each group's lr at warm-up's first step
            f"{self.layer_decay:g}{'' if cfg.layer_decay is not None else ' (by depth)'} -> embeddings "
            f"{min(g['initial_lr'] for g in self.optimizer.param_groups):.2g}; "
            f"{total} steps ({self.epochs:.4g} epochs of {self.steps_per_epoch}"
            f"{f', raised to min_steps={cfg.min_steps}' if floored else ''}), warm-up {warmup}, "
            f"dev every {self.eval_every} steps" + (f", early stopping after {self.patience} without a better "
                                                    "macro-F1" if self.patience else ""))

    def setup_resume(self) -> None:
        """Continue from OUT.work's checkpoint when it holds one of this very run (the settings that shape the
        weights, the train and dev rows, the tokenizer); else start over in a fresh OUT.work."""
        from ..tokenizer.saving import vocab_digest

        cfg = self.cfg
        settings = {k: v for k, v in to_dict(with_absolute_paths(cfg)).items() if k not in RESUMABLE}
        self.run_parts = {"settings": json.loads(json.dumps(settings, default=str)),
                          "train": checkpoint.rows_digest(self.splits.train.texts, self.splits.train.y),
                          "dev": checkpoint.rows_digest(self.splits.dev.texts, self.splits.dev.y),
                          "tokenizer": vocab_digest(self.tok), "weights": checkpoint.weights_digest(self.model)}
        self.run_key = checkpoint.run_key(self.run_parts)
        state = (checkpoint.load(self.work, self.model, self.optimizer, self.run_key, self.run_parts, checkpoint.WORDS,
                                 "fine-tuning", lambda saved: RunState.from_state(saved, self.schedule), self.scaler)
                 if cfg.resume else None)
        if state is None:
            checkpoint.clear_work(self.work)
            return
        state.window.losses = [loss.to(self.device) for loss in state.window.losses]  # (stacked with the next)
        self.state, self.checkpointed = state, state.step
        log(f"resumed from {self.work} at step {state.step} of {self.total_steps} (best dev macro-F1 so far "
            f"{state.best.macro_f1:.4f}, step {state.best.step})")
        self.kept_rows = checkpoint.rows_until(self.work / "metrics.jsonl", state.step)  # a killed run's later rows go

    def save_checkpoint(self) -> None:
        """The run as it is at this step boundary, into OUT.work (the previous checkpoint replaced once it is in)."""
        checkpoint.save(self.work, self.model, self.optimizer, self.state.to_state(self.schedule), self.run_key,
                        self.run_parts, self.scaler)
        self.checkpointed = self.state.step

    @property
    def precision_name(self) -> str:
        return precision_name(self.dtype)

    # -- train and evaluate ----------------------------------------------------------------------

    def evaluate(self) -> None:
        """Score dev, log the row, keep the weights if they are the best so far."""
        st, best = self.state, self.state.best
        y_dev = self.splits.dev.y
        t = time.perf_counter()
        logits = predict_logits(self.model, self.dev_ids, pad_id=self.tok.pad_token_id, device=self.device,
                                dtype=self.dtype, batch_size=self.eval_batch_size, multiple=self.multiple,
                                streams=cpu_streams(self.model, self.device), max_width=self.cfg.max_length)  # as `label` scores
        rep = classification_report(y_dev, logits.argmax(1), self.labels)
        st.eval_time += time.perf_counter() - t
        self.metrics.write({"kind": "eval", "step": st.step, "epoch": round(st.step / self.steps_per_epoch, 3),
                            "loss": cross_entropy(logits, y_dev), "accuracy": rep["accuracy"],
                            "macro_f1": rep["macro_f1"]})
        if rep["macro_f1"] > best.macro_f1:
            best.macro_f1, best.step, best.logits = rep["macro_f1"], st.step, logits
            best.state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            st.since_best = 0
        elif len(np.unique(best.logits.argmax(1))) > 1:
            # Patience counts only once the best model tells classes apart: a model that labels every dev row alike
            # has not started to learn (a random-init 12-layer run sat on the majority class for 1,200 steps and
            # was stopped there, docs/RESULTS.md §11); it keeps the step budget instead.
            st.since_best += 1
        self.bar.set_postfix(dev_f1=f"{rep['macro_f1']:.3f}", best=f"{best.macro_f1:.3f}")

    def log_train(self, w: Window, loss: float) -> None:
        """The window's train row; ``loss``: its mean (``Window.mean_loss``, read by the loop)."""
        st = self.state
        self.metrics.write({"kind": "train", "step": st.step, "epoch": round(st.step / self.steps_per_epoch, 3),
                            "loss": loss, "lr": float(self.schedule.get_last_lr()[-1]),  # (a tensor with cuda_graphs)
                            "examples_per_s": w.examples / max(w.seconds, 1e-9),
                            "elapsed_s": round(st.train_time + st.eval_time, 2)})
        self.bar.set_postfix(loss=f"{loss:.4f}", best=f"{st.best.macro_f1:.3f}")

    def batch(self, idx: np.ndarray):
        """Training rows ``idx`` as host tensors (input_ids, attention_mask, labels), padded as ``collate`` pads,
        in pinned memory on a GPU."""
        import torch

        input_ids, mask = collate(self.train_ids, idx, self.tok.pad_token_id, self.multiple,
                                  max_width=self.cfg.max_length, pin=self.pin)
        labels = self.y_train[torch.from_numpy(idx)]
        return input_ids, mask, labels.pin_memory() if self.pin else labels

    def train(self) -> None:
        """Epochs of batches until total_steps: a train row every log_every steps, a dev evaluation every
        eval_every steps and at the end, early stopping after ``patience`` evaluations without a better
        macro-F1, a checkpoint into OUT.work every save_every steps / save_every_minutes. Ctrl-C or SIGTERM ends
        training early but keeps the run: it is checkpointed at the step's end (the same command continues it)
        and the best model so far is written."""
        import torch
        from tqdm.auto import tqdm

        cfg, st = self.cfg, self.state
        self.y_train = torch.from_numpy(self.splits.train.y)
        self.bar = tqdm(total=self.total_steps, initial=st.step, desc="fine-tuning", unit="step",
                        disable=not cfg.progress, dynamic_ncols=True)
        last_save = time.perf_counter()
        graphed = None
        if self.graphs:
            graphed = GraphedStep(self.model, self.optimizer, batch_size=cfg.batch_size, width=cfg.max_length,
                                  device=self.device, dtype=self.dtype, class_weights=self.class_weights,
                                  max_grad_norm=cfg.max_grad_norm)
        # SIGTERM (a scheduler's, `timeout`'s) as Ctrl-C: stop at the step's end and write the best checkpoint so
        # far; unhandled, it ended the process with nothing saved and the staging folder left behind
        stop = StopRequest(what="fine-tuning")
        with stop:
            try:
                while st.step < self.total_steps and st.stopped == "completed":
                    # A fresh generator per epoch (seeded by seed and epoch): the same run reproduces exactly, and a
                    # resumed one skips the batches of the epoch it had done
                    erng = np.random.default_rng([cfg.seed, st.epoch])
                    batches = (length_grouped_batches(self.lengths, cfg.batch_size, erng) if cfg.group_by_length
                               else shuffled_batches(len(self.lengths), cfg.batch_size, erng))
                    for idx in batches[st.batch:]:
                        t = time.perf_counter()
                        if cfg.compile:
                            torch.compiler.cudagraph_mark_step_begin()  # (CUDA graphs: a new training step)
                        input_ids, mask, labels = self.batch(idx)
                        if graphed is not None:
                            loss = graphed(input_ids, mask, labels)
                        else:
                            loss = train_step(self.model, self.optimizer, input_ids, mask, labels,
                                              device=self.device, dtype=self.dtype, class_weights=self.class_weights,
                                              max_grad_norm=cfg.max_grad_norm, scaler=self.scaler)
                        self.schedule.step()
                        st.step, st.batch = st.step + 1, st.batch + 1
                        st.examples_seen += len(idx)
                        st.window.add(loss, len(idx))
                        self.bar.update(1)
                        if self.on_step is not None:
                            self.on_step(st.step)
                        # The host reads from the device only here, every log_every steps and before an evaluation; the
                        # step that reads waits for the GPU's queued steps, so their time is counted as training time.
                        log_now = st.step % cfg.log_every == 0 or st.step == self.total_steps
                        eval_now = st.step % self.eval_every == 0 or st.step == self.total_steps
                        mean_loss = st.window.mean_loss() if log_now else None
                        if eval_now and not log_now:
                            synchronize(self.device)
                        dt = time.perf_counter() - t
                        st.train_time += dt
                        st.window.seconds += dt
                        if log_now:
                            self.log_train(st.window, mean_loss)
                            st.window = Window()
                        if eval_now:
                            self.evaluate()
                            if self.patience and st.since_best >= self.patience:
                                st.stopped = "early_stopping"
                                break
                        if st.step >= self.total_steps:
                            break
                        if stop.requested:  # the step done, its evaluation too: checkpointed, the best model saved
                            self.save_checkpoint()
                            raise KeyboardInterrupt
                        due = cfg.save_every and st.step % cfg.save_every == 0
                        if due or (cfg.save_every_minutes and time.perf_counter() - last_save
                                   >= 60 * cfg.save_every_minutes):
                            self.save_checkpoint()
                            last_save = time.perf_counter()
                    else:
                        st.epoch, st.batch = st.epoch + 1, 0
            except KeyboardInterrupt:
                st.stopped = "interrupted"
                self.stop_signal = stop.signal if stop.requested else "SIGINT"  # (on_step's, a handler not ours)
                warn(f"\ninterrupted at step {st.step}: writing the best model so far")
                if st.best.state is None:
                    self.evaluate()
        self.bar.close()

    # -- output ----------------------------------------------------------------------------------

    def fitted_tfidf(self):
        """The background fit's model (its error raised here, where the fit in ``save`` would raise it), or None:
        ``save`` fits. After Ctrl-C or SIGTERM this waits for a fit still running, so the run is saved whole."""
        future, self.tfidf_future = self.tfidf_future, None
        return future.result() if future is not None else None

    def save(self) -> dict:
        """The best checkpoint as a Hugging Face model folder + tokenizer, eval.json, data_report.json, the
        resolved config and the plots, all into the staging folder; returns eval.json's dict."""
        import torch

        from ..tokenizer.saving import vocab_digest

        cfg, st, model, staging = self.cfg, self.state, self.model, self.staging
        self.metrics.close()
        model.load_state_dict(st.best.state)
        check_finite(model, "the fine-tune")
        model.config.koelectra_kit = {  # read by the predictor: same truncation as in training
            "task": "text-classification", "max_length": cfg.max_length, "labels": self.labels,
            "source_model": cfg.model, "init": cfg.init, "vocab_digest": vocab_digest(self.tok)}
        with quiet_transformers():
            model.save_pretrained(staging)
        self.tok.save(staging)
        self.report = report = classification_report(self.splits.dev.y, st.best.logits.argmax(1), self.labels,
                                                     scores=st.best.logits)
        result = {
            "model": f"{type(model).__name__} from {cfg.model}" + (" (random init)" if cfg.init == "random" else ""),
            "dev": report,
            "best": {"step": st.best.step, "epoch": round(st.best.step / self.steps_per_epoch, 3)},
            "train": {"rows": len(self.train_ids), "steps": st.step, "epochs": round(st.step / self.steps_per_epoch, 3),
                      "stopped": st.stopped, "train_time_s": round(st.train_time, 2),
                      "eval_time_s": round(st.eval_time, 2), "tokenize_time_s": round(self.tokenize_s, 2),
                      "examples_per_s": round(st.examples_seen / max(st.train_time, 1e-9), 1),
                      "device": str(self.device), "precision": self.precision_name,
                      "threads": torch.get_num_threads(), "lr": self.lr, "layer_decay": self.layer_decay,
                      "parameters": self.n_params},
        }
        try:  # OUT/tfidf, OUT/ensemble and the reference rows: the part that fits (or waits for) TF-IDF
            self.candidates = add_companions(result, staging, self.splits, self.labels, st.best.logits, cfg,
                                             self.fitted_tfidf)
        except KeyboardInterrupt:
            if st.stopped == "interrupted":  # a second Ctrl-C, while the first one's save waits: stop, write nothing
                raise
            # training finished: a Ctrl-C in the TF-IDF fit costs the companions, never the trained model
            warn("\ninterrupted while fitting TF-IDF: writing the fine-tuned model without OUT/tfidf, OUT/ensemble "
                 "and the reference rows")
            for name in ("tfidf", "ensemble"):
                shutil.rmtree(staging / name, ignore_errors=True)
            self.candidates, result["interrupted"] = None, "tfidf"
            result.pop("candidates", None)
            result.pop("references", None)
            self.tfidf_future = None  # a background fit still running is left to its daemon thread
        write_json_atomic(staging / "eval.json", result)
        write_json_atomic(staging / "data_report.json", self.splits.report)
        write_text_atomic(staging / "finetune_config.yaml", dump_yaml(with_absolute_paths(cfg)))
        checkpoint.publish_work_files(self.work, staging)
        from ..classify.modelcard import classifier_card, write_card

        write_card(classifier_card(cfg, result, self.labels, self.tok, self.splits.report), staging)
        if cfg.plots:
            from ..io.plots import plot_confusion, plot_finetune_curves

            plot_confusion(report, staging / "confusion.png")
            plot_finetune_curves(self.metrics.rows, staging / "curves.png", best_step=st.best.step)
        return result

    def cleanup(self, done: bool = False) -> None:
        """Close what is open; a staging folder still there (the run failed) is removed, and so is OUT.work when
        the run is ``done`` or has no checkpoint to continue from; an interrupted or failed run's is kept."""
        if self.bar is not None:
            self.bar.close()
        if self.metrics is not None:
            self.metrics.close(failed=True)  # save() closed it when the run got that far: this is a no-op then
        if self.staging is not None:
            remove_staging(self.staging)
        checkpoint.release_work(self.work, self.work_fd, done)
        self.work_fd = None
        # a failed run's TF-IDF fit still running: left to its daemon thread, which ends with the process
        self.tfidf_future = None

    def run(self) -> dict:
        done = False
        self.work_fd = checkpoint.hold_work(self.work, self.out)  # one run at a time for this out=
        try:
            self.setup_model()
            self.setup_data()
            self.setup_optimizer()
            self.setup_resume()
            # the trackers write into OUT.work (OUT/runs, OUT/wandb once the run is published); save() closes them
            trackers = Trackers(self.report_to, self.work, to_dict(self.cfg), name=self.out.resolve().name,
                                start_step=self.state.step)
            self.metrics = MetricsLog(self.work / "metrics.jsonl", trackers, self.kept_rows)
            log(f"metrics: {self.work / 'metrics.jsonl'} (moved to {self.out} at the end)")
            job = tfidf_job(self.splits, self.labels, self.cfg)
            if _background_fit(self.device, job, self.graphs):  # on a GPU: the fit save() needs, beside training
                self.tfidf_future = fit_in_background(job)
            self.train()
            self.staging = make_staging_dir(self.out)
            result = self.save()
            replaced = replaced_note(self.out)
            publish_dir(self.staging, self.out)
            done = self.state.stopped != "interrupted" or self.checkpointed is None
        finally:
            self.cleanup(done)
        if replaced:
            log(replaced)
        st = self.state
        print(format_report(self.report, title=f"dev (best step {st.best.step} of {st.step}, {st.stopped})"))
        if "references" in result:
            from ..classify.references import format_references

            print(format_references(self.report, result["references"]))
        if self.candidates:
            from .companions import format_candidates

            log(format_candidates(self.candidates, self.out))
        log(f"train {st.train_time:.1f}s ({result['train']['examples_per_s']:.0f} examples/s), "
            f"eval {st.eval_time:.1f}s; wrote {self.out}/ (model, eval.json, data_report.json, metrics.jsonl"
            f"{', confusion.png, curves.png' if self.cfg.plots else ''}, README.md)")
        if st.stopped == "interrupted" and self.checkpointed is not None:
            log(f"{self.work} keeps the run at step {self.checkpointed} of {self.total_steps}: the same command "
                "continues it (resume=false starts over)")
        if self.cfg.push_to_hub:  # after the folder is complete: a failed push loses nothing
            from ..hub.repo import push_folder

            log(f"pushed to {push_folder(self.out, self.cfg.push_to_hub, self.cfg.hub_private)}")
        # the folder to label with, for the caller (not in eval.json, where an absolute path goes stale with a move)
        best = (self.candidates or {}).get("folder", ".")
        result["best_model"] = str((self.out if best == "." else self.out / best).resolve())
        return result


def finetune(cfg: FinetuneConfig | dict, on_step: Callable[[int], None] | None = None) -> dict:
    """Train, pick the best dev macro-F1 checkpoint, write ``cfg.out``; returns eval.json's dict, with
    ``best_model``: the absolute folder of the best of the candidates (OUT, or OUT/ensemble, OUT/tfidf with
    ensemble=tfidf). ``cfg``: a FinetuneConfig or a dict of its keys, validated as ``load_config`` validates.
    ``on_step(step)`` runs after every optimizer step (tests stop a run there, as a kill would).

    Ctrl-C (a KeyboardInterrupt, Jupyter's interrupt) publishes the best model so far as the CLI does, then raises
    ``errors.Interrupted`` (a KeyboardInterrupt; ``.result`` holds the dict): the code after the call must not go on
    with a half-trained model. A SIGTERM (a scheduler's) returns, with ``result["train"]["stopped"] == "interrupted"``.
    """
    cfg = checked(cfg, FinetuneConfig, "finetune")
    with entry_scope():
        recipe = FinetuneRecipe(cfg, on_step)
        result = recipe.run()
    if recipe.stop_signal != "SIGTERM" and (result["train"]["stopped"] == "interrupted"
                                           or result.get("interrupted") == "tfidf"):
        raise Interrupted(result)
    return result

"""The pretraining run: named setup steps, then one flat training loop, then the final checkpoint, export,
plot and summary. ``pretrain(cfg)`` is the entry point; ``PretrainRecipe`` holds what the steps share (model,
optimizer, data, loop state) so that no step needs closures over another's locals.

Order matters for exact reproduction: the tokenizer and data come before ``set_seed``, the model is built
right after it (identical initialization on every rank), and the per-rank dropout and masking streams are
seeded after the optimizer exists; a resumed run then overwrites those streams with the checkpoint's.
"""
from __future__ import annotations

import contextlib
import json
import math
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Callable

from ..config import checked, dump_yaml, to_dict
from ..errors import ConfigError, Interrupted
from ..io.fileio import write_json_atomic, write_text_atomic
from ..io.hfdata import corpus_paths
from ..io.trackers import Trackers, trackers_to_open
from ..io.scope import entry_scope
from ..runtime import (StopRequest, autocast_dtype, get_logger, log, memory_refusal, nonfinite_weights,
                       precision_name, refuse_unless_batch_fits, refuse_unless_it_fits, set_seed, warn)
from ..tokenizer import tokenizer_fingerprint
from .checkpoint import (LoopState, check_corpus_outside_run, check_resume_request, check_run_dir, check_start_over,
                         latest_checkpoint, read_checkpoint, resolve_resume, rng_state, save_checkpoint, set_rng_state,
                         start_over)
from .config import PretrainConfig
from .curves import below_unigram, plot_curves, read_metrics
from .data import (TOKENIZER_REQUEST, BatchSource, check_corpus, check_tokenizer_dir, checked_rows, data_fingerprint,
                   open_packed_data, prepare_tokenizer)
from .distributed import DistContext, SharedClock, SharedStop, param_digest
from .export import export_models, push_discriminator
from .report import SlowSteps, log_line, metrics_row, plateau_warning, postfix
from .schedule import budget_progress, disc_weight_at, lr_factor, warmup_done

OnStep = Callable[[int, "dict | None"], None]


def pretrain(cfg: PretrainConfig | dict, on_step: OnStep | None = None) -> dict:
    """Run (or resume) pretraining; returns the summary (also written to ``out/summary.json``). ``cfg``: a
    PretrainConfig or a dict of its keys, validated as ``load_config`` validates.

    ``on_step(step, metrics_row_or_None)`` is called after every optimizer step (tests use it to stop a run
    mid-way, as a kill would). Ctrl-C checkpoints and exports the step it stopped at, then raises
    ``errors.Interrupted`` (``.result``: the summary); a SIGTERM's stop returns, its summary's ``stopped``
    "interrupted"."""
    cfg = checked(cfg, PretrainConfig, "pretrain")
    with entry_scope():
        recipe = PretrainRecipe(cfg, DistContext(cfg.device, cfg.ddp_timeout_minutes), on_step)
        try:
            try:
                recipe.setup()
            except BaseException:
                recipe.discard_new_out()
                raise
            summary = recipe.train()
        finally:
            recipe.cleanup()
    if summary.get("stopped") == "interrupted" and recipe.stop_signal == "SIGINT":
        raise Interrupted(summary)
    return summary


class PretrainRecipe:
    """One run of ``cfg`` on this process's rank of ``dist_ctx``."""

    def __init__(self, cfg: PretrainConfig, dist_ctx: DistContext, on_step: OnStep | None = None):
        self.cfg, self.dist, self.on_step = cfg, dist_ctx, on_step
        self.stop_signal: str | None = None  # what stopped the run before its budget: SIGINT (Ctrl-C) or SIGTERM
        self.out = Path(cfg.out)
        self.device, self.rank, self.world, self.main = dist_ctx.device, dist_ctx.rank, dist_ctx.world, dist_ctx.is_main

    def setup(self) -> None:
        self.check_settings()
        self.setup_out_dir()
        self.setup_data()
        self.setup_model()
        self.setup_optimizer()
        self.setup_masking()
        self.setup_resume()
        self.setup_parallel()
        self.setup_trackers()

    def check_settings(self) -> None:
        """Every check before out/ is touched (``pretrain --nproc`` also runs them once, before any rank starts:
        preflight.py), ending with what to resume from (``self.ckpt``)."""
        self.setup_engine()
        self.setup_init()
        self.setup_inputs()
        self.check_batch_fits()
        self.ckpt = self.check_out_dir()

    def setup_engine(self) -> None:
        """Threads, precision, and the micro-batch size every rank and accumulation step gets."""
        import torch

        cfg = self.cfg
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        self.amp_dtype = autocast_dtype(self.device, cfg.precision)
        if self.amp_dtype == torch.float16 and self.device.type != "cuda":
            raise ConfigError("precision=fp16 needs a CUDA GPU; on CPU use bf16 (or auto)")
        self.micro_bs, rem = divmod(cfg.batch_size, self.world * cfg.grad_accum)
        if rem or self.micro_bs < 1:
            raise ConfigError(f"batch_size {cfg.batch_size} must be a multiple of ranks x grad_accum "
                              f"({self.world} x {cfg.grad_accum})")

    def notes(self, lines, say=warn) -> None:
        """Lines about the run's settings, said once (by rank 0)."""
        for line in lines if self.main else ():
            say(line)

    def setup_init(self) -> None:
        """Continued pretraining (``init=``): where the weights come from, and the config's shape made the
        checkpoint's before config.yaml is written (``continued.py`` says what wins, and why)."""
        self.init_src = None
        if self.cfg.init:
            from .continued import apply_init_shape, resolve_init

            self.init_src = resolve_init(self.cfg)
            self.notes(apply_init_shape(self.cfg, self.init_src))

    def setup_inputs(self) -> None:
        """The corpus and a given tokenizer exist, or the prepared-data folder opens (and sets seq_len), and the
        trackers' packages exist, checked before out/ is made or the config logged (only rank 0 reports to
        trackers)."""
        self.report_to = trackers_to_open(self.cfg.report_to) if self.main else []
        self.prepared = None
        if self.cfg.prepared:
            from .prepared import apply_prepared_shape, open_prepared

            self.prepared = open_prepared(self.cfg.prepared)
            from .prepared import check_init_vocab

            check_init_vocab(self.cfg, self.prepared)
            self.notes(apply_prepared_shape(self.cfg, self.prepared))
            return
        check_corpus_outside_run(self.out, self.cfg.corpus)
        self.corpus = check_corpus(self.cfg.corpus)
        if self.cfg.tokenizer and not self.cfg.init:
            check_tokenizer_dir(self.cfg.tokenizer)

    def check_batch_fits(self) -> None:
        """A batch whose activations can't fit, said before out/ is made (batch_size=1e9: the OS killed the run
        without a word). Per row and discriminator layer, a floor: ~6 x hidden (input, q, k, v, attention output,
        residuals) and 2 x intermediate (the FFN before and after gelu)."""
        cfg, m = self.cfg, self.cfg.model
        itemsize = 4 if self.amp_dtype is None else 2  # bf16/fp16 autocast: half-width activations
        per_row = cfg.seq_len * (6 * m.hidden_size + 2 * m.intermediate_size) * itemsize * m.num_layers
        refuse_unless_batch_fits(per_row, self.micro_bs, self.device,
                                 f"batch_size {cfg.batch_size} ({self.micro_bs} sequences of {cfg.seq_len} tokens a "
                                 "micro-batch)", "lower batch_size or raise grad_accum")

    def check_out_dir(self):
        """The checkpoint to resume from, or None for a fresh start, which out= must allow (``start_over``'s
        refusal); nothing in out/ touched."""
        cfg, out = self.cfg, self.out
        check_run_dir(out)
        ckpt = resolve_resume(cfg, out)
        if ckpt is not None:
            check_resume_request(ckpt, cfg, out)
        elif out.exists():
            check_start_over(out, cfg.overwrite)
        return ckpt

    def setup_out_dir(self) -> None:
        """Resume or fresh start (decided by ``check_out_dir``); then out/ made and the resolved config written."""
        cfg, out = self.cfg, self.out
        self.created_out = self.main and not out.exists()
        if self.ckpt is None and self.main:
            start_over(out, cfg.overwrite, keep_tokenizer=(out / TOKENIZER_REQUEST).exists() or bool(cfg.tokenizer))
        self.dist.barrier()
        if self.main:
            out.mkdir(parents=True, exist_ok=True)
            if self.ckpt is None:  # a resume's once its checkpoint accepts it (a refused one's was left as the run's)
                write_text_atomic(out / "config.yaml", dump_yaml(cfg))

    def setup_data(self) -> None:
        """Tokenizer (given or trained here) and the packed rows (rank 0 builds the cache, the others map it), or
        both from the prepared-data folder."""
        if self.prepared is not None:
            self.tok = self.prepared.tok
            self.tok_fp = tokenizer_fingerprint(self.tok)
            self.data = checked_rows(self.prepared.data, self.prepared.path, self.main,
                                     "prepare it again with more text (or a lower seq_len)")
            return
        # a dataset's texts as a file (written once into the cache), which the tokenizer's and the packed caches key on
        self.corpus = corpus_paths(self.corpus, self.cfg.text_column, self.cfg.cache_dir)
        self.tok = prepare_tokenizer(self.cfg, self.out, self.dist, self.corpus, resuming=self.ckpt is not None)
        self.tok_fp = tokenizer_fingerprint(self.tok)
        self.data = open_packed_data(self.cfg, self.tok, self.tok_fp, self.corpus, self.dist)

    def setup_model(self) -> None:
        from ..electra import cpu as electra_cpu, model as electra

        cfg, tok = self.cfg, self.tok
        if cfg.fast_cpu_kernels:
            electra_cpu.register_cpu_sdpa()
        attn = electra_cpu.CPU_SDPA if cfg.fast_cpu_kernels else "sdpa"

        build = partial(electra.build_pretrain_model, tok.vocab_size, tok.pad_token_id,
                        sorted(set(tok.all_special_ids)), cfg.model, cfg.generator, cfg.objective,
                        cfg.model.max_position_embeddings, cfg.temperature, attn_implementation=attn)
        too_big = (f"the model (model.hidden_size {cfg.model.hidden_size}, generator.size {cfg.generator.size:g}, "
                   "...)", "lower model.* or generator.*")
        if self.init_src is None:  # (before the seed: whatever the count draws is drawn again from it)
            refuse_unless_it_fits(build, self.device, *too_big)
        set_seed(cfg.seed)  # identical initialisation on every rank
        if self.init_src is not None:
            from .continued import init_line, load_init_model

            with memory_refusal(f"init={cfg.init}", "continue it on a machine with more memory"):
                self.model, notes = load_init_model(cfg, self.init_src, tok, attn)
            self.notes([init_line(cfg, self.init_src), *notes], say=log)
        else:
            with memory_refusal(*too_big):
                self.model = build()
        if cfg.fast_cpu_kernels:
            electra_cpu.use_fast_dropout(self.model)
        self.model.to(self.device)

    def setup_optimizer(self) -> None:
        import torch

        from ..electra.model import build_optimizer

        cfg = self.cfg
        self.optimizer = build_optimizer(self.model, cfg.lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2),
                                         cfg.adam_eps, self.device.type)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None

    def setup_masking(self) -> None:
        """Dropout draws from torch's global generator; masking and sampling from their own (per rank:
        different masks on every rank, reproducible from the seed). Then the batch source that masks."""
        import torch

        seed = self.cfg.seed
        torch.manual_seed(seed * 1000 + 1 + self.rank)
        self.mask_rng = torch.Generator(device=self.device)
        self.mask_rng.manual_seed(seed * 1000 + 500 + self.rank)
        self.batches = BatchSource(self.cfg, self.data, self.tok, self.device, self.mask_rng, self.rank, self.world)

    def setup_resume(self) -> None:
        """A fresh loop state, or the checkpoint's: weights, optimizer, RNG streams, data position, counters."""
        import torch

        cfg, tok = self.cfg, self.tok
        self.resumed_row = None  # the last metrics row up to the checkpoint: the summary's until the loop logs one
        if self.ckpt is None:
            self.state = LoopState.fresh(tok.vocab_size, self.device)
            return
        saved = read_checkpoint(self.ckpt, self.model, self.optimizer, self.scaler, tok.vocab_size, self.tok_fp, cfg,
                                data_fingerprint(self.data), self.main)
        self.state, rng_states = LoopState.from_checkpoint(saved, self.device, self.rank, self.world)
        if len(rng_states) == self.world:
            set_rng_state(rng_states[self.rank], self.mask_rng)
        else:
            # Another number of ranks: each rank's RNG streams can't be continued; reseed from (seed, step).
            torch.manual_seed(cfg.seed * 1000 + 1 + self.rank + 7919 * self.state.step)
            self.mask_rng.manual_seed(cfg.seed * 1000 + 500 + self.rank + 7919 * self.state.step)
            if self.main:
                warn(f"note: checkpoint was written by {len(rng_states)} rank(s), this run has {self.world}: data "
                     "order continues exactly, dropout/masking randomness does not")
        if self.main:
            log(f"resumed from {self.ckpt} at step {self.state.step} ({self.state.tokens:,} tokens)")
            write_text_atomic(self.out / "config.yaml", dump_yaml(cfg))
            kept = [r for r in read_metrics(self.out / "metrics.jsonl") if r["step"] <= self.state.step]
            write_text_atomic(self.out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in kept))
            self.resumed_row = kept[-1] if kept else None

    def setup_parallel(self) -> None:
        """DDP and/or torch.compile around the model (``wrapped``: what the forward runs through)."""
        import torch

        from ..electra.model import compile_layers, generator_shape

        cfg, model = self.cfg, self.model
        mode = None if cfg.compile_mode == "default" else cfg.compile_mode
        if cfg.compile and cfg.compile_scope == "layers":
            compile_layers(model, mode)  # in place, before DDP wraps the model (as torch's DDP + compile guide does)
        self.wrapped = self.dist.wrap(model)
        if cfg.compile and cfg.compile_scope == "model":
            self.wrapped = torch.compile(self.wrapped if self.wrapped is not None else model, mode=mode)
        self.enc_params = sum(p.numel() for p in model.encoder().parameters())
        if self.main:
            n_params = sum(p.numel() for p in model.parameters())
            gen = generator_shape(cfg.model, cfg.generator) if cfg.objective == "electra" else None
            amp = str(self.amp_dtype).replace("torch.", "") if self.amp_dtype else "fp32"
            log(f"model: {cfg.objective}, encoder {self.enc_params / 1e6:.2f}M parameters, {n_params / 1e6:.2f}M "
                "trained" + (f" (generator hidden {gen['hidden_size']}, {gen['num_heads']} heads, FFN "
                             f"{gen['intermediate_size']}, {gen['num_layers']} layers)" if gen else "")
                + f"; {self.device}, {amp}, {self.world} rank(s), batch {cfg.batch_size} = {self.world} x "
                f"{cfg.grad_accum} x {self.micro_bs}, {torch.get_num_threads()} threads")

    def setup_trackers(self) -> None:
        """Rank 0's trackers (report_to), opened last: wandb takes seconds to start, which must not count in the
        run's clock (it starts with the loop). ``progress`` closes them however the loop ends."""
        self.trackers = Trackers(self.report_to, self.out, to_dict(self.cfg), name=self.out.resolve().name,
                                 start_step=self.state.step)

    def train(self) -> dict:
        """The loop: schedule, batch, step, count, log, checkpoint; until the budget is used. Then the end of
        the run (``finish``)."""
        from ..electra.model import train_step

        cfg, s, dist = self.cfg, self.state, self.dist
        self.model.train()
        t_start = time.perf_counter() - s.elapsed
        t_window, tokens_window = time.perf_counter(), 0
        clock = SharedClock(dist, cfg.log_every)  # rank 0's clock on every rank, read without a sync per step
        last_save = s.elapsed
        step_s = 0.0  # duration of the last step (time-budget warm-up looks one step ahead)
        self.slow = SlowSteps()
        saved_at = s.step if self.ckpt is not None else -1
        first_step = s.step  # (a resume of a finished run takes no step: it has no last batch to log a row of)
        last_row = self.resumed_row  # as the uninterrupted run's: a resume that logs no row kept its final and warning
        # Ctrl-C (or SIGTERM in a single process): the step ends, then the run checkpoints and exports; DDP ranks
        # agree on the step first (SharedStop)
        stop = StopRequest(what="pretraining", **({} if self.world == 1 else {
            "after": "the next step (every rank stops at the same one)", "signals": ("SIGINT",),
            "same_within_s": 1.0}))
        agreed, interrupted = SharedStop(dist, stop), False
        batch_what = f"batch_size {cfg.batch_size} ({self.micro_bs} sequences of {cfg.seq_len} tokens a micro-batch)"
        with stop, self.progress() as (bar, metrics_f):
            def log_row() -> dict:
                """The window's row (over every rank) to metrics.jsonl, the trackers and the bar; the window
                emptied. A loss that is not finite stops the run here (check_finite), on every rank."""
                nonlocal t_window, tokens_window
                now = time.perf_counter()
                row = metrics_row(cfg, s, dist, self.data.n, lr, lam, last_stats, grad_norm, now - t_window,
                                  tokens_window)
                s.window.clear()
                t_window, tokens_window = now, 0
                if self.main:
                    self.report(row, bar, metrics_f)
                if not math.isfinite(row["loss"]):  # every rank's row (its losses are reduced over them)
                    self.check_finite()
                return row

            while True:
                # Every rank must stop at the same step and use the same lr: a time budget runs on rank 0's clock.
                elapsed, ahead = clock.read(s.step, time.perf_counter() - t_start, step_s)
                progress = budget_progress(cfg, s.step, elapsed)
                if progress >= 1.0:
                    break
                if agreed.now():
                    interrupted, self.stop_signal = True, stop.signal or "SIGINT"  # (a DDP rank: rank 0's stop)
                    break
                next_progress = budget_progress(cfg, s.step + 1, elapsed + ahead)
                if s.warm_end is None and warmup_done(cfg, s.step, progress):
                    s.warm_end = progress  # the decay runs from here to the end of the budget
                lr = cfg.lr * lr_factor(cfg, s.step, progress, next_progress, s.warm_end)
                lam = disc_weight_at(cfg, s.step)

                t0 = time.perf_counter()
                # a batch above check_batch_fits' floor that still does not fit: one line, not the allocator's trace
                with memory_refusal(batch_what, "lower batch_size or raise grad_accum"):
                    mbs, batch_tokens = self.batches.micro_batches(s.data_pos)
                    last_stats, sums, grad_norm = train_step(
                        self.model, self.optimizer, mbs, disc_weight=lam, lr=lr, amp_dtype=self.amp_dtype,
                        device_type=self.device.type, scaler=self.scaler, max_grad_norm=cfg.max_grad_norm,
                        rng=self.mask_rng, wrapped=self.wrapped)
                s.add_step(sums, len(mbs), last_stats["targets"], batch_tokens, cfg.batch_size, last_stats["valid"])
                tokens_window += batch_tokens
                s.elapsed = time.perf_counter() - t_start
                step_s = time.perf_counter() - t0
                bar.update(1)
                slow = self.slow.add(s.step, step_s)
                if slow and self.main:
                    log(slow)

                row = None
                if s.step % cfg.log_every == 0:
                    row = last_row = log_row()
                due = cfg.save_every > 0 and s.step % cfg.save_every == 0
                if cfg.save_every_minutes > 0:  # rank 0's clock again: every rank must join the save
                    now_s, _ = clock.read(s.step, time.perf_counter() - t_start, step_s)
                    due = due or now_s - last_save >= cfg.save_every_minutes * 60
                if due:
                    self.save_checkpoint()
                    saved_at = s.step
                    last_save, _ = clock.read(s.step, time.perf_counter() - t_start, step_s)
                if self.on_step is not None:
                    self.on_step(s.step, row)
            if not interrupted and s.window and s.step > first_step:
                # the budget's last steps, short of a log_every window: their row (a run shorter than log_every
                # left metrics.jsonl empty, no curves, a model card of "? steps"). Not for a stop: a resume logs
                # the uninterrupted run's rows. The checkpoint is written again after it (one taken at this step
                # holds the window), so a resume of the finished run adds no second one.
                last_row = log_row()
                saved_at = -1
        agreed.settle()
        if saved_at != s.step:
            self.save_checkpoint()
        return self.finish(last_row, "interrupted" if interrupted else "completed")

    @contextlib.contextmanager
    def progress(self):
        """(progress bar, rank 0's open metrics.jsonl), both closed however the loop ends, as are the trackers
        (a failed run's wandb run marked failed). While the bar is shown, log lines (the plateau warning) are
        printed above it instead of through it."""
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        cfg = self.cfg
        bar = tqdm(total=cfg.max_steps if cfg.max_steps > 0 else None, initial=self.state.step, unit="step",
                   desc="pretraining", disable=not (cfg.progress and self.main), dynamic_ncols=True)
        metrics_f = open(self.out / "metrics.jsonl", "a", encoding="utf-8") if self.main else None
        logger = get_logger()
        # Only our own console handler is swapped; a logger without handlers (the application configured
        # logging) is left to the application.
        above = logging_redirect_tqdm(loggers=[logger]) if logger.handlers and not bar.disable else \
            contextlib.nullcontext()
        try:
            with above, self.trackers:
                yield bar, metrics_f
        finally:
            bar.close()
            if metrics_f:
                metrics_f.close()

    def report(self, row: dict, bar, metrics_f) -> None:
        """Rank 0: the row to metrics.jsonl and the trackers, the bar or a log line, and the "learning?" warning
        once."""
        cfg, s = self.cfg, self.state
        metrics_f.write(json.dumps(row) + "\n")
        metrics_f.flush()
        self.trackers.log(row, "pretrain")
        bar.set_postfix_str(postfix(row, cfg, s.elapsed), refresh=False)
        if not cfg.progress:
            log(log_line(row))
        if (cfg.plateau_check_tokens > 0 and not s.plateau_warned and row["on_plateau"]
                and s.tokens >= cfg.plateau_check_tokens):
            s.plateau_warned = True
            warn(plateau_warning(row, cfg))

    def check_finite(self) -> None:
        """A run whose loss diverged (lr=1e12) has NaN or infinite weights: they are neither checkpointed (over the
        last good checkpoint, which keep_checkpoints would prune) nor exported as the encoder, exit 0. One line; a
        folder this run made, with no checkpoint in it, goes."""
        bad = nonfinite_weights(self.model)
        if not bad:
            return
        kept = latest_checkpoint(self.out) if self.main else None
        self.discard_new_out()
        raise ConfigError(f"pretraining diverged by step {self.state.step}: {len(bad)} of the model's weight tensors "
                          "are NaN or infinite (the loss overflowed: lower lr, or keep the preset's); "
                          + (f"the last checkpoint, {kept}, is from before it; nothing else was saved" if kept else
                             "nothing was saved"))

    def save_checkpoint(self) -> None:
        """Every rank's RNG state and counts to rank 0, which writes the checkpoint; the others wait for it."""
        self.check_finite()  # on every rank (their weights are the same): all stop here together
        gathered = self.dist.gather((rng_state(self.mask_rng), self.state.counts()))  # every rank's own
        if self.main:
            meta = {"vocab_size": self.tok.vocab_size, "tokenizer_fingerprint": self.tok_fp,
                    "data_fingerprint": data_fingerprint(self.data),
                    "config": to_dict(self.cfg), "tokens": self.state.tokens, "world_size": self.world}
            save_checkpoint(self.out, self.model, self.optimizer, self.scaler, self.state.to_checkpoint(gathered),
                            meta, self.cfg.keep_checkpoints)
        self.dist.barrier()  # a failed save raised on rank 0; the others stop at the next collective

    def finish(self, last_row: dict | None, stopped: str = "completed") -> dict:
        """Rank agreement, export, plot and summary (rank 0 writes; every rank returns the summary)."""
        cfg, s, out = self.cfg, self.state, self.out
        digests = self.dist.share(param_digest(self.model))  # (on the store: the ranks' last meeting)
        summary = {"steps": s.step, "tokens": s.tokens, "elapsed_s": round(s.elapsed, 1),
                   "tokens_per_s": round(s.tokens / max(s.elapsed, 1e-9), 1), "world_size": self.world,
                   "rank_param_digests": digests, "ranks_in_sync": len(set(digests)) == 1, "final": last_row,
                   "encoder_parameters": self.enc_params, "stopped": stopped, "slow_steps": self.slow.steps,
                   "data": {k: self.data.meta[k] for k in ("texts", "rows", "tokens")}}
        if self.main:
            if not summary["ranks_in_sync"]:
                warn(f"warning: DDP ranks ended with different weights ({digests}); this is a bug, please report it")
            exported = export_models(self.model, self.tok, out, {
                "steps": s.step, "tokens": s.tokens, "stopped": stopped,
                "precision": precision_name(self.amp_dtype)})  # the arithmetic used, not the setting (auto)
            summary["exported"] = {k: str(v) for k, v in exported.items()}
            if cfg.plots and read_metrics(out / "metrics.jsonl"):
                summary["curves"] = str(plot_curves(out))
            if below_unigram(last_row):
                summary["warning"] = (
                    f"generator accuracy ended at {last_row['gen_acc']:.3f}, below always predicting the most "
                    f"frequent token ({last_row['gen_unigram_acc']:.3f}): the encoder has learned little; train "
                    "longer, or see the cpu-30min preset for a recipe that leaves this plateau on a CPU")
                warn("warning: " + summary["warning"])
            write_json_atomic(out / "summary.json", summary)
            if cfg.push_to_hub:
                log(f"pushed to {push_discriminator(out, cfg.push_to_hub, cfg.hub_private)}")
            log(f"done: {s.step} steps, {s.tokens:,} tokens in {s.elapsed / 60:.1f} min "
                f"({summary['tokens_per_s']:,.0f} tokens/s); encoder in {exported['discriminator']}")
            if summary["stopped"] == "interrupted":
                warn(f"interrupted at step {s.step}, before the end of the budget: the encoder above is the one "
                     "at this step; rerun the same command with resume=true to continue from its checkpoint")
        self.dist.barrier()
        return summary

    def discard_new_out(self) -> None:
        """A run that fails before its first checkpoint leaves no folder it made itself (a config.yaml alone
        would make the next ``out=`` look like a run to resume); a folder that was there before stays."""
        if getattr(self, "created_out", False) and latest_checkpoint(self.out) is None:
            shutil.rmtree(self.out, ignore_errors=True)

    def cleanup(self) -> None:
        if getattr(self, "trackers", None) is not None:
            self.trackers.close(failed=True)  # open here only when the run ended between setup and the loop
        self.wrapped = None  # DDP goes before the process group (DistContext.close says why)
        self.dist.close()

"""What a pretraining run reports every ``log_every`` steps: the metrics row written to ``metrics.jsonl``
(losses, generator accuracy against the unigram baseline, discriminator AUC/precision/recall, replaced
fraction, lr, lambda, throughput, the plateau flag), and its short forms for the progress bar and the log; and
the steps that took far longer than the usual one.
"""
from __future__ import annotations

import math

from .checkpoint import LoopState
from .config import PretrainConfig


def metrics_row(cfg: PretrainConfig, state: LoopState, dist_ctx, n_rows: int, lr: float, lam: float,
                last_stats: dict, grad_norm, window_s: float, window_tokens: int) -> dict:
    """The row for ``state.step`` from the window's sums over all ranks (one host sync per row, none per
    step). Discriminator AUC comes from the last micro-batch only (ranks are not merged: it needs the
    logits, not sums)."""
    import torch

    from ..electra.model import replaced_auc

    w = {k: v.detach().double() for k, v in state.window.items()}
    keys = sorted(w)
    flat = dist_ctx.all_reduce_sum(torch.stack([w[k] for k in keys]))
    w = dict(zip(keys, flat.tolist()))
    n_micro = max(1.0, w.get("n_micro", 1.0))
    uni = dist_ctx.all_reduce_sum(state.unigram.clone())

    def ratio(a, b):
        return (w[a] / w[b]) if w.get(b) else None

    row = {"step": state.step, "tokens": state.tokens, "epoch": round(state.data_pos / n_rows, 4),
           "elapsed_s": round(state.elapsed, 2), "loss": w["loss"] / max(1.0, w["n_steps"]),
           "gen_loss": w["gen_loss"] / n_micro, "gen_acc": ratio("gen_correct", "n_masked"),
           "gen_unigram_acc": float(uni.max() / uni.sum().clamp(min=1)),
           "lr": lr, "tokens_per_s": round(window_tokens / max(window_s, 1e-9), 1),
           "grad_norm": float(grad_norm)}
    if cfg.objective == "electra":
        row.update({"disc_loss": w["disc_loss"] / n_micro, "disc_weight": lam,
                    "disc_acc": ratio("disc_correct", "n_real"), "disc_precision": ratio("true_pos", "pred_pos"),
                    "disc_recall": ratio("true_pos", "n_replaced"), "replaced_frac": ratio("n_replaced", "n_real"),
                    "disc_auc": None})
        real_mask = last_stats["real"].bool()
        auc = replaced_auc(last_stats["d_logits"][real_mask], last_stats["labels"][real_mask])
        row["disc_auc"] = None if math.isnan(auc) else auc
    on_plateau = row["gen_acc"] is not None and row["gen_acc"] < row["gen_unigram_acc"] + cfg.plateau_gen_margin
    if cfg.objective == "electra" and row["disc_auc"] is not None:
        on_plateau = on_plateau or row["disc_auc"] < cfg.plateau_auc
    row["on_plateau"] = bool(on_plateau)
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}


def postfix(row: dict, cfg: PretrainConfig, elapsed: float) -> str:
    """The progress bar's tail: throughput, losses, and the time budget left."""
    eta = ""
    if cfg.max_minutes > 0:
        eta = f" budget left {max(0.0, cfg.max_minutes - elapsed / 60):.1f}min"
    s = f"{row['tokens_per_s']:,.0f} tok/s gen {row['gen_loss']:.3f}"
    if row.get("disc_loss") is not None:
        s += f" disc {row['disc_loss']:.3f}"
    return s + eta


def log_line(row: dict) -> str:
    """One metrics row as a log line (printed instead of the bar with progress=false)."""
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    s = (f"step {row['step']} | {row['tokens'] / 1e6:.2f}M tokens | gen {row['gen_loss']:.3f} "
         f"acc {fmt(row['gen_acc'], '.3f')} (unigram {row['gen_unigram_acc']:.3f})")
    if "disc_loss" in row:
        s += f" | disc {row['disc_loss']:.4f} auc {fmt(row['disc_auc'], '.3f')} replaced {fmt(row['replaced_frac'], '.3f')}"
    return s + f" | lr {row['lr']:.2e} | {row['tokens_per_s']:,.0f} tok/s"


def plateau_warning(row: dict, cfg: PretrainConfig) -> str:
    """The "learning?" warning: still on the plateau where the generator predicts token frequencies."""
    disc = f", discriminator AUC {row['disc_auc']:.3f}" if row.get("disc_auc") is not None else ""
    return (f"learning? after {row['tokens']:,} tokens the generator's masked-token accuracy is {row['gen_acc']:.3f} "
            f"(predicting the most frequent token scores {row['gen_unigram_acc']:.3f}){disc}: the run is still on "
            "the plateau where the generator predicts token frequencies; consider a higher lr, a shorter warm-up, "
            "no dropout or a smaller model (see configs/pretrain/)")


class SlowSteps:
    """Steps whose host time was far above the run's usual step: a recompile (an input a compiled step had not
    seen: on an H100 one cost ~57 s inside a 2-minute run, and nothing in the metrics rows showed where), a stalled
    disk or machine. Each is said once in the log and kept for summary.json. A process's first steps are left out:
    they compile and record CUDA graphs by design."""

    SKIP, FACTOR, MIN_S, KEEP = 3, 20.0, 5.0, 20

    def __init__(self):
        self.usual: float | None = None  # moving average of the ordinary steps' seconds
        self.seen = 0
        self.steps: list[list] = []  # [step, seconds], the first KEEP

    def add(self, step: int, seconds: float) -> str | None:
        """Record optimizer step ``step``'s host seconds; the log line when it was a slow one."""
        self.seen += 1
        if self.seen <= self.SKIP:
            return None
        if self.usual is not None and seconds >= max(self.MIN_S, self.FACTOR * self.usual):
            if len(self.steps) < self.KEEP:
                self.steps.append([step, round(seconds, 2)])
            return (f"note: step {step} took {seconds:.1f} s, the usual step {self.usual:.3f} s: a recompile "
                    "(TORCH_LOGS=recompiles names the input that changed), or the machine or disk stalled")
        self.usual = seconds if self.usual is None else 0.9 * self.usual + 0.1 * seconds
        return None

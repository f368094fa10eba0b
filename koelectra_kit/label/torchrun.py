"""``torchrun --nproc_per_node=N -m koelectra_kit label ...``: one labelling job over N processes (one a GPU), into
the one output an unsharded run writes.

Each process (torchrun's ``RANK`` R of ``WORLD_SIZE`` N) labels shard R+1 of N of every input, exactly as ``--shard
R+1/N`` does (into ``OUTPUT.shard-K-of-N.EXT``, resumable as any shard): on GPU ``LOCAL_RANK`` where the device is a
GPU, and on the CPU with the cores split between the machine's ranks (two processes that each start a thread per core
slow each other far more than 2x). Then the ranks meet (gloo: a rendezvous on the host, no GPU memory), and rank 0
joins each input's shards with ``label-merge``'s checks, removes them once the output is in place, and prints one
summary of the whole file (the counts each shard's job record keeps) and draws ``--plot`` from it.

A rank that fails ends the job (torchrun stops the others): finished chunks stay in the shards' partial files and
the same command with ``--resume`` goes on; a rank whose shard is already complete skips it. Rank 0 joins the
shards from its own disk: across machines they must be on a shared file system (``label-merge`` otherwise names
the shard it cannot find).
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ConfigError, InputError
from ..runtime import log, world_size
from .config import LabelConfig
from .shard import job_path, merge_shards, read_job, shard_counts, shard_path
from .summary import LabelSummary, plot_distribution

# Ranks wait for the slowest one's shard; with --resume one rank may have finished days ago. torchrun ends the job
# when a rank fails, so the wait is for work, not for a process that is gone.
MEET_TIMEOUT = datetime.timedelta(days=7)


@dataclass
class Launch:
    """This process's place in a torchrun job, and the job's unsharded outputs (set by ``rank_config``)."""

    rank: int
    world: int
    local_rank: int
    local_world: int
    outputs: tuple[Path, ...] = ()
    finished: tuple[str, ...] = ()  # inputs whose output --resume found complete and this job's: no rank labels them
    plot: str | None = None
    joining: bool = False  # rank 0, past the wait for the others: joining the shards into the outputs

    @classmethod
    def from_env(cls) -> "Launch | None":
        """None unless torchrun started this process as one of several."""
        world = world_size()
        if world < 2:
            return None
        env = os.environ
        return cls(rank=int(env.get("RANK", "0")), world=world, local_rank=int(env.get("LOCAL_RANK", "0")),
                   local_world=int(env.get("LOCAL_WORLD_SIZE", str(world))))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def rank_config(self, cfg: LabelConfig) -> LabelConfig:
        """``cfg`` as this rank runs it: its shard, its GPU or its share of the cores, progress on rank 0 only, the
        plot left to the end. Refuses what a torchrun job can't be, before any rank labels a row."""
        self.plot, device, threads = cfg.plot, cfg.device, cfg.threads
        gpus = _gpus() if device in ("auto", "cuda") else 0
        if gpus:
            device = f"cuda:{self.local_rank % gpus}"
            _use_gpu(self.local_rank % gpus)
        elif threads is None and not device.startswith("cuda"):
            threads = max(1, (os.cpu_count() or 1) // self.local_world)
        cfg = replace(cfg, device=device, threads=threads)  # (a finished output checked loads the model: here, too)
        self.outputs, done = refuse_for_ranks(cfg, self.world)
        self.finished = tuple(job.input for job in done)
        if cfg.progress and self.is_main:
            for job in done:
                log(f"{job.output} is complete: skipped")
        return replace(cfg, shard=f"{self.rank + 1}/{self.world}", plot=None, progress=cfg.progress and self.is_main)

    def meet(self) -> None:
        """Join the job's process group (gloo: on the host, no GPU memory) as the ranks start, so that at the end
        they wait for each other in ``join``, where Ctrl-C reaches a rank (``runtime.wait_for_ranks``; inside the
        group's rendezvous its handler would wait as long as the rank). ``leave`` when done."""
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo", timeout=MEET_TIMEOUT)

    def leave(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()

    def join(self, summaries: list[LabelSummary]) -> list[LabelSummary]:
        """Wait for every rank; on rank 0, each output joined from its shards (which are then removed) and its
        summary: the counts from the shards' job records (a rank that skipped its complete shard counts too), the
        rows this run labelled and the slowest rank's time from every rank (over the rendezvous store:
        ``wait_for_ranks`` says why not a gloo collective). Other ranks get []."""
        from ..runtime import wait_for_ranks

        self.meet()
        try:
            ran = {s.output: (s.new_rows, s.seconds) for s in summaries}  # keyed by the shard file written
            gathered = wait_for_ranks(self.world, MEET_TIMEOUT.total_seconds(),
                                      "rerun with --resume to go on from the finished chunks", share=ran)
            if not self.is_main:
                return []
            self.joining = True  # (rank 0 joins the shards from here)
            joined = []
            for out in self.outputs:
                shards = [shard_path(out, k, self.world) for k in range(1, self.world + 1)]
                records = [read_job(s) or {} for s in shards]
                merge_shards(out, overwrite=True)  # rank_config refused an existing output without --overwrite
                for shard in shards:
                    shard.unlink(missing_ok=True)
                    job_path(shard).unlink(missing_ok=True)
                summary = combine(records, str(out))
                runs = [rank[str(shard)] for rank in gathered for shard in shards if str(shard) in rank]  # (labelled)
                summary.new_rows = sum(n for n, _ in runs)
                summary.seconds = max((t for _, t in runs), default=0.0)  # side by side: the slowest rank's
                joined.append(summary)
            if self.plot and len(joined) == 1:
                plot_distribution(joined[0], self.plot)
            return joined
        finally:
            self.leave()


def refuse_for_ranks(cfg: LabelConfig, world: int) -> tuple[tuple[Path, ...], tuple[LabelConfig, ...]]:
    """What a job of ``world`` ranks can't be, refused before any rank labels a row; (the job's unsharded outputs
    to join, the jobs whose output is complete and this job's: a many-file run's with --resume, skipped as one
    process skips them, ``FilesLabeller.finished``)."""
    from .files import FilesLabeller

    if cfg.shard is not None:
        raise ConfigError(f"shard={cfg.shard!r} under torchrun: each of its {world} processes labels its own shard of "
                          "the file and rank 0 joins them; leave --shard out (or start the shards yourself without "
                          "torchrun)")
    if cfg.writes_workbook:
        raise ConfigError(f"{cfg.output}: under torchrun the ranks' shards are joined by their bytes, which a "
                          "workbook can't be; label into .csv under torchrun (or into .xlsx in one process)")
    files = FilesLabeller(cfg)  # (unsharded: the outputs the join writes)
    outputs, finished = [], []
    for job in files.jobs:  # before any labelling: the join at the end would refuse it after hours of work
        out = Path(job.output)
        if out.exists() and not cfg.overwrite:
            if files.finished(job):
                finished.append(job)
                continue
            state = "is complete" if cfg.resume else "exists"
            raise InputError(f"{out} {state}; pass --overwrite to label it again")
        stale = sorted({n for n in shard_counts(out) if n != world})
        if stale:  # the join would find them beside this job's and refuse, after every rank had labelled
            raise InputError(f"{out}: shards of an earlier run of {', '.join(map(str, stale))} processes are beside it "
                             f"({shard_path(out, 1, stale[0]).name}, ...); remove them, or run with --nproc "
                             f"{stale[0]} to continue that run")
        outputs.append(out)
    return tuple(outputs), tuple(finished)


def check_job(cfg: LabelConfig, world: int) -> None:
    """Everything a job of ``world`` ranks would refuse before labelling, checked once in the process that starts
    them (``label --nproc``) before any rank loads the model: ``refuse_for_ranks`` (with --resume, a finished output
    is checked against its record with the model loaded here), the model folder, and each input and shard output as
    rank 1's shard sees them (the other ranks' differ only in the shard's number)."""
    from ..classify.registry import toolkit_kind
    from ..hub.modelio import check_model_source
    from .files import FilesLabeller
    from .run import FileLabeller

    _, done = refuse_for_ranks(cfg, world)
    for job in FilesLabeller(replace(cfg, shard=f"1/{world}", plot=None), skip=tuple(j.input for j in done)).jobs:
        FileLabeller(job).check_paths()
    if toolkit_kind(cfg.model) is None:  # a TF-IDF or ensemble folder has classifier.json, no config.json
        check_model_source(cfg.model)


def combine(records: list[dict], output: str) -> LabelSummary:
    """One file's summary from its shards' job records (their ``counts``: ``FileLabeller.shard_job``)."""
    out = LabelSummary(output=output)
    for record in records:
        c = record.get("counts") or {}  # none in a record an older version wrote: its rows go uncounted
        out.rows += c.get("rows", 0)
        out.reused += c.get("reused", 0)
        out.human += c.get("human", 0)
        out.flattened += c.get("flattened", 0)
        for into, key in ((out.per_label, "per_label"), (out.status, "status")):
            for name, n in c.get(key, {}).items():
                into[name] = into.get(name, 0) + n
        out.malformed += c.get("malformed", [])
        out.human_labels = out.human_labels or record.get("human_labels_file")
        out.human_conflicts = max(out.human_conflicts, c.get("human_conflicts", 0))  # the labels file's: any shard's
    return out


def _use_gpu(index: int) -> None:
    """This rank's GPU as torch's current one: what is made on "the" GPU without naming it (the CUDA context pinned
    memory opens, say) then lands there, not as N contexts on GPU 0."""
    import torch

    torch.cuda.set_device(index)


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0

"""`pretrain ablate --executor ray`: the runs in parallel on a Ray cluster, each one Ray task holding what its
layout needs (``num_cpus`` = processes, and ``num_gpus`` = processes when it trains on GPUs), so Ray places as
many runs at once as the cluster fits. A task trains exactly as the local executor does (runs.execute: the
same folders, DONE.json, resume from the checkpoint), so the workers must see ``DIR`` at the same path (a shared
file system on a real cluster), and a killed ablation, rerun with either executor, continues where it stopped.
A task whose worker or node dies is retried by Ray (``MAX_RETRIES``) and resumes from its checkpoint.
Without ``--address`` a local Ray instance is started (``--ray-cpus`` CPUs, default all).
"""
from __future__ import annotations

import time
from dataclasses import asdict

from curate.config import ConfigError
from pretrain.ablate import runs

MAX_RETRIES = 2


def _execute(run: dict, command_for) -> dict:
    """The Ray task: one run, trained or resumed (or read back if done)."""
    return runs.execute(runs.Run(**run), command_for)


class RayRuns:
    def __init__(self, address: str | None = None, cpus: int | None = None):
        from curate.executors.ray import connect_ray

        self.ray, self.started = connect_ray(address, cpus, missing=ConfigError)

    def has_gpus(self) -> bool:
        return self.ray.cluster_resources().get("GPU", 0) > 0

    def check_fits(self, shape: runs.Shape) -> None:
        """A run must fit on one node (torchrun runs its processes on one machine)."""
        key = "GPU" if shape.gpu else "CPU"
        nodes = [n.get("Resources", {}).get(key, 0) for n in self.ray.nodes() if n.get("Alive")]
        largest = int(max(nodes, default=0))
        if shape.nproc > largest:
            raise ConfigError(f"each run needs {shape.nproc} {key}s on one node (tp x pp x dp of the config) but "
                              f"the largest node of the Ray cluster has {largest}: lower parallel.tp / pp / dp, or "
                              "add larger nodes")

    def largest_memory(self) -> int | None:
        """Bytes of memory Ray gives tasks on its largest live node (None: not said)."""
        sizes = [n.get("Resources", {}).get("memory", 0) for n in self.ray.nodes() if n.get("Alive")]
        return int(max(sizes)) if sizes and max(sizes) > 0 else None

    def run_all(self, plan: list, log, command_for=runs.command) -> dict:
        """Every run not done yet, in parallel as resources allow; {(variant, seed): DONE record}."""
        from pretrain.ablate.ablation import progress_line

        ray = self.ray
        records, pending, started = {}, {}, {}
        for i, run in enumerate(plan, 1):
            rec = runs.done(run)
            if rec is not None:
                records[(run.variant, run.seed)] = rec
                log(progress_line(i, len(plan), run, rec, None))
                continue
            task = ray.remote(num_cpus=run.nproc, num_gpus=run.nproc if run.gpu else 0, max_retries=MAX_RETRIES,
                              retry_exceptions=False)(_execute)
            ref = task.remote(asdict(run), command_for)
            pending[ref], started[ref] = (i, run), time.monotonic()
        if pending:
            log(f"{len(pending)} runs submitted to Ray ({ray.cluster_resources().get('CPU', 0):.0f} CPUs, "
                f"{ray.cluster_resources().get('GPU', 0):.0f} GPUs)")
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                ref = ready[0]
                i, run = pending.pop(ref)
                try:
                    rec = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    cause = e.as_instanceof_cause()
                    raise (cause if isinstance(cause, runs.RunFailed) else runs.RunFailed(str(e))) from None
                records[(run.variant, run.seed)] = rec
                log(progress_line(i, len(plan), run, rec, time.monotonic() - started[ref]))
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
        return records

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()

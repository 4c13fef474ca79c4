"""From the runs' final metrics to the verdict: per variant the mean and standard deviation of each metric over
its seeds, each variant against the baseline, and each metric's signal-to-noise ratio.

The rule (``RULE``, also in `pretrain ablate --help` and docs/ablate.md): ``delta`` = mean(variant) -
mean(baseline); its standard error is Welch's, ``sqrt(s_v^2 / n_v + s_b^2 / n_b)`` with ``s`` the seed-to-seed
standard deviation (n - 1 in the denominator); the verdict is ``better`` or ``worse`` when |delta| is more than
two standard errors, the sign read with the metric's direction (lower bits per byte and perplexity are better,
higher accuracy), else ``within noise``. With one seed there is no spread to measure: the verdict is
``no noise estimate (1 seed)`` and stderr is null. When every seed of both gives exactly the same value (an
accuracy over few items often does) the spread seen is zero, which is no estimate either: a nonzero delta then
gets ``no noise estimate (seeds agree exactly)``.

Why not a paired test over seeds: runs of the same seed share their initialisation, so pairing would cancel that
part of the noise, but with 2-3 seeds its standard error rests on 1-2 differences and can come out near zero by
chance; the unpaired error is larger (conservative) and uses every run's spread. Two standard errors is about a
95% interval only with many seeds: with 2 seeds read ``better`` as "beyond the seed spread seen", not as a test
at 5%.

Signal-to-noise ratio per metric: (largest - smallest variant mean) / noise, noise = the root mean square of the
variants' seed standard deviations (null with one seed or when every seed agrees exactly).
"""
from __future__ import annotations

import math

RULE = ("verdict: delta = mean(variant) - mean(baseline) over seeds; stderr = sqrt(s_v^2/n_v + s_b^2/n_b) "
        "(Welch, s = seed-to-seed std); better / worse when |delta| > 2 stderr (lower bits_per_byte and "
        "perplexity are better, higher acc), else within noise; one seed, or seeds that agree exactly: no noise "
        "estimate")
Z = 2.0
ONE_SEED = "no noise estimate (1 seed)"
NO_SPREAD = "no noise estimate (seeds agree exactly)"


def higher_is_better(metric: str) -> bool:
    """Direction of ``TASK/METRIC`` (pretrain.eval.metrics.HIGHER_IS_BETTER by the metric's own name)."""
    from pretrain.eval.metrics import HIGHER_IS_BETTER

    name = metric.rsplit("/", 1)[-1]
    if name not in HIGHER_IS_BETTER:
        raise KeyError(f"metric {name!r} has no known direction (pretrain.eval.metrics.HIGHER_IS_BETTER)")
    return HIGHER_IS_BETTER[name]


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n - 1); the std is None for one value."""
    n = len(values)
    m = math.fsum(values) / n
    if n < 2:
        return m, None
    return m, math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))


def summarize(runs: list[dict]) -> tuple[dict, dict]:
    """({metric: mean}, {metric: std or None}) over the runs of one variant (the metrics every run has)."""
    metrics = [m for m in runs[0]["metrics"] if all(m in r["metrics"] for r in runs)]
    means, stds = {}, {}
    for m in metrics:
        means[m], stds[m] = mean_std([float(r["metrics"][m]) for r in runs])
    return means, stds


def verdict(delta: float, stderr: float | None, higher_better: bool) -> str:
    if stderr is None:
        return ONE_SEED
    if stderr == 0 and delta != 0:
        return NO_SPREAD
    if not abs(delta) > Z * stderr:
        return "within noise"
    return "better" if (delta > 0) == higher_better else "worse"


def compare(variant: dict, baseline: dict, metric: str, higher_better: bool) -> dict:
    """One row of ``comparisons``: variant and baseline are ``{"runs": [...], "mean": ..., "std": ...}``."""
    n_v, n_b = len(variant["runs"]), len(baseline["runs"])
    delta = variant["mean"][metric] - baseline["mean"][metric]
    s_v, s_b = variant["std"][metric], baseline["std"][metric]
    stderr = None if s_v is None or s_b is None else math.sqrt(s_v ** 2 / n_v + s_b ** 2 / n_b)
    return {"variant": variant["name"], "baseline": baseline["name"], "metric": metric, "delta": delta,
            "stderr": stderr, "verdict": verdict(delta, stderr, higher_better)}


def snr(variants: list[dict], metric: str) -> float | None:
    """(max - min of the variant means) / RMS of the variants' seed standard deviations."""
    stds = [v["std"][metric] for v in variants]
    if any(s is None for s in stds):
        return None
    means = [v["mean"][metric] for v in variants]
    signal = max(means) - min(means)
    noise = math.sqrt(math.fsum(s * s for s in stds) / len(stds))
    if noise == 0:
        return None
    return signal / noise


def results(tokens: int, seeds: list[int], baseline: str, records: dict[str, list[dict]],
            direction=higher_is_better) -> dict:
    """results.json without contamination: ``records`` maps each variant (in spec order) to its runs' DONE
    records (in seed order)."""
    variants = []
    for name, runs in records.items():
        mean, std = summarize(runs)
        variants.append({"name": name, "runs": [{"seed": r["seed"], "tokens": r["tokens"], "metrics": r["metrics"]}
                                                for r in runs], "mean": mean, "std": std})
    base = next(v for v in variants if v["name"] == baseline)
    metrics = [m for m in base["mean"] if all(m in v["mean"] for v in variants)]
    comparisons = [compare(v, base, m, direction(m)) for v in variants if v is not base for m in metrics]
    return {"tokens": tokens, "seeds": list(seeds), "baseline": baseline, "variants": variants,
            "comparisons": comparisons, "snr": {m: snr(variants, m) for m in metrics}, "rule": RULE}

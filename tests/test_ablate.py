"""`pretrain ablate`: the spec's checks, the verdict rules on made-up numbers, the contamination check, the
orchestration with a stand-in trainer (resume, DONE markers), and end to end on real text: the shipped sample's
prose against a word-shuffled copy of it, 2 seeds, a tiny model (the prose must come out `better`), killed with
SIGKILL and rerun (the same results.json), and on a local Ray instance."""
from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from curate.config import ConfigError
from pretrain.ablate import stats
from pretrain.ablate.spec import load_spec, spec_from_dict
from pretrain.ablate.toml_out import dumps
from tests.conftest import ROOT, SAMPLE

PROXY = ROOT / "pretrain" / "configs" / "proxy-tiny.toml"


# --- data: curated folders as `curate run` writes them, from the shipped sample -------------------------

def curated_folder(out: Path, texts: list[str]) -> Path:
    """A curation output folder (one Arrow shard and its manifest) holding ``texts``."""
    from curate.schema import documents_to_table
    from curate.shards import write_json, write_shard_entry

    rows = [{"id": f"d{i}", "text": t, "source": "test", "url": "", "content_type": "text/plain"}
            for i, t in enumerate(texts)]
    entry = write_shard_entry(documents_to_table(rows), out / "data" / "part-00000.arrow", out)
    write_json({"shards": [dataclasses.asdict(entry)], "dropped": []}, out / "manifest.json")
    return out


def sample_prose() -> list[str]:
    with gzip.open(SAMPLE / "prose.jsonl.gz", "rt") as f:
        return [json.loads(line)["text"] for line in f]


def shuffled_words(text: str, seed: int) -> str:
    words = text.split()
    random.Random(seed).shuffle(words)
    return " ".join(words)


@pytest.fixture(scope="module")
def prose_data(tmp_path_factory):
    """Two variants of the same documents (prose, and each document's words shuffled) and a held-out bpb file."""
    tmp = tmp_path_factory.mktemp("ablate_data")
    docs = sample_prose()
    train, held_out = docs[:120], docs[-40:]
    prose = curated_folder(tmp / "prose", train)
    shuffled = curated_folder(tmp / "shuffled", [shuffled_words(t, i) for i, t in enumerate(train)])
    evals = tmp / "prose_eval.jsonl"
    evals.write_text("".join(json.dumps({"text": t[:1000]}) + "\n" for t in held_out[:16]))
    return {"prose": prose, "shuffled": shuffled, "eval": evals, "tmp": tmp}


def spec_table(data: dict, **extra) -> dict:
    table = {"config": str(PROXY), "tokens": 24 * 1024, "seeds": [1, 2], "baseline": "shuffled", "vocab_size": 512,
             "eval_points": 2,
             "variants": [{"name": "prose", "curated": [str(data["prose"])]},
                          {"name": "shuffled", "curated": [str(data["shuffled"])]}],
             "tasks": [{"name": "prose", "kind": "bpb", "path": str(data["eval"])}]}
    table.update(extra)
    return table


def write_spec(path: Path, table: dict) -> Path:
    lines = [f"{k} = {json.dumps(v)}" for k, v in table.items() if k not in ("variants", "tasks")]
    for kind in ("variants", "tasks"):
        for row in table[kind]:
            lines += ["", f"[[{kind}]]"] + [f"{k} = {json.dumps(v)}" for k, v in row.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


# --- the spec --------------------------------------------------------------------------------------------

@pytest.fixture
def small_data(tmp_path):
    docs = sample_prose()
    a = curated_folder(tmp_path / "a", docs[:6])
    b = curated_folder(tmp_path / "b", docs[6:12])
    ev = tmp_path / "ev.jsonl"
    ev.write_text(json.dumps({"text": "a held out text"}) + "\n")
    return {"prose": a, "shuffled": b, "eval": ev, "tmp": tmp_path}


@pytest.mark.parametrize("change, message", [
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"baseline": "nosuch"}, "baseline = 'nosuch' is not a variant"),
    ({"seeds": []}, "seeds is empty"),
    ({"seeds": [1, 1]}, "repeat a seed"),
    ({"seeds": [2 ** 32]}, "seeds must be in"),  # train.seed and numpy take 32 bits
    ({"tokens": 0}, "tokens = 0"),
    ({"tasks": []}, "no [[tasks]]"),
    ({"config": "no/such.toml"}, "does not exist"),
    ({"variants": [{"name": "prose", "curated": ["/no/such/folder"]}, {"name": "shuffled", "curated": []}]},
     "does not exist"),
    ({"variants": [{"name": "x", "curated": []}, {"name": "shuffled", "curated": []}]}, "neither"),
    ({"variants": [{"name": "shuffled", "blend": "data_specs/demo.toml"}, {"name": "x", "blend": "data_specs/demo.toml"}]},
     "set tokenizer"),
    ({"variants": [{"name": "a/b", "curated": []}]}, "letters, digits"),
    ("same folder twice", "is listed twice"),  # its documents were tokenized and mixed in twice
])
def test_spec_errors_name_what_to_change(small_data, change, message):
    if change == "same folder twice":
        change = {"variants": [{"name": "prose", "curated": [str(small_data["prose"])] * 2},
                               {"name": "shuffled", "curated": [str(small_data["shuffled"])]}]}
    table = spec_table(small_data, **change)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        spec_from_dict(table, "spec.toml")


def test_spec_needs_two_variants_and_its_keys(small_data):
    table = spec_table(small_data)
    table["variants"] = table["variants"][:1]
    table["baseline"] = "prose"
    with pytest.raises(ConfigError, match="at least two"):
        spec_from_dict(table)
    table = spec_table(small_data)
    del table["seeds"]
    with pytest.raises(ConfigError, match="missing key 'seeds'"):
        spec_from_dict(table)
    table = spec_table(small_data)
    table["variants"][0]["name"] = "shuffled"
    with pytest.raises(ConfigError, match="used twice"):
        spec_from_dict(table)


def test_spec_paths_become_absolute(small_data, monkeypatch):
    monkeypatch.chdir(small_data["tmp"])
    spec = spec_from_dict(spec_table(small_data, variants=[{"name": "prose", "curated": ["a"]},
                                                           {"name": "shuffled", "curated": ["b"]}]))
    assert spec.variants[0].curated == [str(small_data["prose"].resolve())]
    assert Path(spec.config).is_absolute()


def test_too_few_tokens_and_too_many_devices_fail_at_start(small_data):
    from pretrain.ablate.runs import check_local_devices, shape_of

    with pytest.raises(ConfigError, match="less than one step"):
        shape_of(spec_from_dict(spec_table(small_data, tokens=1000)), have_cuda=False)
    with pytest.raises(ConfigError, match="more than a run counts"):  # was a loop for ever, a step at a time
        shape_of(spec_from_dict(spec_table(small_data, tokens=10 ** 22)), have_cuda=False)
    shape = shape_of(spec_from_dict(spec_table(small_data)), have_cuda=False)
    assert (shape.steps, shape.tokens, shape.nproc, shape.gpu, shape.eval_interval) == (24, 24 * 1024, 1, False, 12)
    many = (os.cpu_count() or 1) + 1
    spec = spec_from_dict(spec_table(small_data, overrides=[f"parallel.dp={many}", "train.micro_batch=1",
                                                            f"train.global_batch={many}"]))
    shape = shape_of(spec, have_cuda=False)
    assert shape.nproc == many
    with pytest.raises(ConfigError, match=f"needs {many} processes"):
        check_local_devices(shape)
    bad = spec_from_dict(spec_table(small_data, overrides=["parallel.tp=3"]))  # 4 heads: tp 3 does not divide
    with pytest.raises(ConfigError, match="num_heads"):
        shape_of(bad, have_cuda=False)


def test_steps_follow_tokens_with_batch_rampup():
    from pretrain.ablate.runs import steps_for
    from pretrain.config import load_config

    cfg = load_config(PROXY, ["train.global_batch=8", "train.micro_batch=2", "train.rampup_batch_size=[2, 2, 40]"])
    steps, tokens = steps_for(cfg, 100 * 128)
    # batches 2, 2, ... (ramp over 40 samples in 3 increments), every sample 128 tokens
    assert tokens <= 100 * 128 and tokens // 128 + cfg.train.global_batch > 100 and steps > 100 // 8


def test_steps_for_counts_a_batch_size_at_once_and_equals_the_step_by_step_count():
    """``steps_for`` jumps over the steps of one batch size (``tokens = 1e300`` looped for ever, a step at a
    time); on random ramps, batches and budgets it gives the step-by-step count."""
    from pretrain.ablate.runs import steps_for
    from pretrain.config import batch_size_at, load_config

    def step_by_step(cfg, tokens):
        steps = consumed = 0
        while (consumed + batch_size_at(cfg, consumed)) * cfg.data.seq_len <= tokens:
            steps, consumed = steps + 1, consumed + batch_size_at(cfg, consumed)
        return steps, consumed * cfg.data.seq_len

    rng = random.Random(0)
    for _ in range(500):
        gbs = rng.choice([1, 3, 8, 96, 1000])
        over = [f"data.seq_len={rng.choice([1, 7, 64])}", f"train.global_batch={gbs}", "train.micro_batch=1"]
        if rng.random() < 0.7:
            ramp = [rng.randint(1, gbs), rng.randint(1, gbs), rng.choice([0, 7, 333, 5000])]
            over.append(f"train.rampup_batch_size={ramp}")
        cfg = load_config(PROXY, over)
        tokens = rng.choice([0, 63, 1000, 12345, 10 ** 6])
        assert steps_for(cfg, tokens) == step_by_step(cfg, tokens), (over, tokens)
    cfg = load_config(PROXY, ["train.rampup_batch_size=[2, 2, 40]"])
    t0 = time.perf_counter()
    steps, tokens = steps_for(cfg, int(1e300))
    assert time.perf_counter() - t0 < 1 and steps > 10 ** 290 and tokens <= 1e300


# --- statistics ------------------------------------------------------------------------------------------

def run_records(values: dict[str, list[float]], metric="t/bits_per_byte") -> dict:
    return {name: [{"seed": s, "tokens": 10, "metrics": {metric: v}} for s, v in enumerate(vals, 1)]
            for name, vals in values.items()}


def direction(metric):
    return metric.endswith("acc")


def test_verdict_is_two_welch_standard_errors():
    res = stats.results(10, [1, 2, 3], "raw", run_records({"cur": [1.0, 1.1, 0.9], "raw": [1.5, 1.4, 1.6]}),
                        direction)
    (c,) = res["comparisons"]
    assert c["delta"] == pytest.approx(-0.5)
    assert c["stderr"] == pytest.approx(math.sqrt(0.01 / 3 + 0.01 / 3))
    assert c["verdict"] == "better"  # lower bits per byte
    assert res["variants"][0]["std"]["t/bits_per_byte"] == pytest.approx(0.1)
    assert res["snr"]["t/bits_per_byte"] == pytest.approx(0.5 / 0.1)
    worse = stats.results(10, [1, 2, 3], "raw", run_records({"cur": [1.5, 1.6, 1.4], "raw": [1.0, 1.1, 0.9]}),
                          direction)
    assert worse["comparisons"][0]["verdict"] == "worse"


def test_difference_inside_two_standard_errors_is_noise():
    # delta 0.1, stderr sqrt(2 * 0.01 / 2) = 0.1: within 2 stderr
    res = stats.results(10, [1, 2], "raw", run_records({"cur": [1.0, 1.2], "raw": [1.2, 1.0]}), direction)
    c = res["comparisons"][0]
    assert c["delta"] == pytest.approx(0.0) and c["verdict"] == "within noise"
    res = stats.results(10, [1, 2], "raw", run_records({"cur": [1.0, 1.2], "raw": [1.15, 1.25]}), direction)
    c = res["comparisons"][0]
    assert abs(c["delta"]) < 2 * c["stderr"] and c["verdict"] == "within noise"


def test_accuracy_is_better_when_higher():
    res = stats.results(10, [1, 2], "raw", run_records({"cur": [0.60, 0.61], "raw": [0.40, 0.41]}, "t/acc"),
                        direction)
    assert res["comparisons"][0]["verdict"] == "better"
    assert stats.higher_is_better("lambada/acc") and not stats.higher_is_better("prose/bits_per_byte")


def test_one_seed_has_no_noise_estimate():
    res = stats.results(10, [1], "raw", run_records({"cur": [1.0], "raw": [2.0]}), direction)
    c = res["comparisons"][0]
    assert c["stderr"] is None and c["verdict"] == stats.ONE_SEED
    assert res["variants"][0]["std"]["t/bits_per_byte"] is None and res["snr"]["t/bits_per_byte"] is None
    json.dumps(res, allow_nan=False)


def test_seeds_that_agree_exactly_measure_no_noise():
    # an accuracy over few items: every seed the same value
    res = stats.results(10, [1, 2], "raw", run_records({"cur": [0.28, 0.28], "raw": [0.19, 0.19]}, "t/acc"),
                        direction)
    c = res["comparisons"][0]
    assert c["stderr"] == 0 and c["verdict"] == stats.NO_SPREAD and res["snr"]["t/acc"] is None
    json.dumps(res, allow_nan=False)
    same = stats.results(10, [1, 2], "raw", run_records({"cur": [0.0, 0.0], "raw": [0.0, 0.0]}, "t/acc"), direction)
    assert same["comparisons"][0]["verdict"] == "within noise"
    one_flat = stats.results(10, [1, 2], "raw", run_records({"cur": [0.3, 0.5], "raw": [0.2, 0.2]}, "t/acc"),
                             direction)
    assert one_flat["comparisons"][0]["stderr"] == pytest.approx(math.sqrt(0.02 / 2))


# --- the TOML the runs are given -------------------------------------------------------------------------

def test_run_config_toml_reads_back():
    data = {"model": {"hidden_size": 64, "init_seed": None}, "train": {"lr": 3e-3, "rampup_batch_size": [2, 2, 40],
                                                                       "compile": False},
            "data": {"blend": 'a "quoted" path\\x', "tokenizer": "t\u00e9.model"},
            "eval": {"interval": 5, "tasks": [{"name": "p", "kind": "bpb", "path": "/x.jsonl", "limit": 0},
                                              {"name": "q", "kind": "choice", "path": "/y.jsonl", "shots": 2}]}}
    back = tomllib.loads(dumps(data))
    data["model"].pop("init_seed")
    assert back == data


# --- contamination ---------------------------------------------------------------------------------------

def test_contamination_finds_items_in_a_variant(tmp_path):
    from pretrain.ablate import contamination

    docs = sample_prose()
    leaked = docs[300][2000:2600]  # an eval passage cut from a training document
    clean = "The quick brown fox jumps over the lazy dog near the quiet river bank at dawn every day."
    tasks = {"prose": [{"text": leaked}, {"text": clean}],
             "choice": [{"context": docs[301][:200], "choices": ["yes it is so", "no"], "label": 0}]}
    index = contamination.Index(tasks)
    with_leak = index.found(contamination.scan(index, [docs[290:310]]))
    assert with_leak["found"] == 2 and with_leak["items"] == 3
    assert with_leak["tasks"]["prose"] == {"items": 2, "found": 1, "share": 0.5}
    assert with_leak["tasks"]["choice"]["found"] == 1  # its context is in docs[301]
    without = index.found(contamination.scan(index, [docs[:100]]))
    assert without["found"] == 0 and without["share"] == 0.0
    # a passage found in more than max_matches (10) documents is a common phrase, not a leak
    common = index.found(contamination.scan(index, [[leaked] * 11]))
    assert common["found"] == 0
    assert index.found(contamination.scan(index, [[leaked] * 10]))["found"] == 1
    warn = contamination.warnings_for({"raw": with_leak, "cur": without}, 0.01)
    assert len(warn) == 1 and "'raw'" in warn[0]


# --- the loop, with a stand-in trainer -------------------------------------------------------------------

FAKE_TRAINER = r'''
import json, sys, tomllib, pathlib
cfg = tomllib.loads(pathlib.Path(sys.argv[1]).read_text())
log = pathlib.Path(cfg["log"]["dir"]); log.mkdir(parents=True, exist_ok=True)
calls = log / "calls"; calls.write_text(str(int(calls.read_text()) + 1 if calls.exists() else 1))
if '"fail"' in pathlib.Path(cfg["data"]["blend"]).read_text():  # a dataset named fail
    print("boom: the data is bad"); sys.exit(1)
steps, every, seed = cfg["train"]["steps"], cfg["eval"]["interval"], cfg["train"]["seed"]
base = 1.0 if pathlib.Path(cfg["data"]["blend"]).parent.name == "prose" else 1.5
with open(log / "metrics.jsonl", "a") as f:
    for s in range(every, steps + 1, every):
        v = base + 0.01 * seed + 1.0 / s
        f.write(json.dumps({"step": s, "tokens": s * 1024, "eval/prose/bits_per_byte": v}) + "\n")
        f.write(json.dumps({"step": s, "loss": 3.0}) + "\n")
'''


@pytest.fixture
def fake_trainer(tmp_path):
    script = tmp_path / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    return lambda run: [sys.executable, str(script), str(run.config_path)]


def test_loop_writes_results_and_skips_finished_runs(small_data, fake_trainer, tmp_path):
    from pretrain.ablate.ablation import run_ablation

    spec = spec_from_dict(spec_table(small_data, tokens=16 * 1024, eval_points=4), "spec.toml")
    lines = []
    res = run_ablation(spec, tmp_path / "out", log=lines.append, command_for=fake_trainer)
    assert set(res) >= {"tokens", "seeds", "baseline", "variants", "comparisons", "snr", "contamination", "rule"}
    assert [v["name"] for v in res["variants"]] == ["prose", "shuffled"]
    prose = res["variants"][0]
    assert [r["seed"] for r in prose["runs"]] == [1, 2]
    assert prose["runs"][0]["metrics"] == {"prose/bits_per_byte": pytest.approx(1.0 + 0.01 + 1 / 16)}
    (c,) = res["comparisons"]
    assert c["variant"] == "prose" and c["baseline"] == "shuffled" and c["verdict"] == "better"
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == json.loads(json.dumps(res))
    assert (tmp_path / "out" / "curves" / "prose_bits_per_byte.png").stat().st_size > 1000
    assert "**better**" in (tmp_path / "out" / "report.md").read_text()
    last = [ln for ln in lines if ln.startswith("[4/4] shuffled seed 2:")]
    assert len(last) == 2 and "training 16 steps" in last[0] and "prose/bits_per_byte 1.5" in last[1]
    cfg = tomllib.loads((tmp_path / "out" / "runs" / "prose" / "seed-2" / "config.toml").read_text())
    assert cfg["train"]["seed"] == 2 and cfg["model"]["init_seed"] == 2 and cfg["train"]["steps"] == 16
    assert cfg["eval"]["interval"] == 4 and cfg["eval"]["tasks"][0]["path"] == str(small_data["eval"].resolve())
    # a rerun reads the finished runs back: no trainer is started
    again = run_ablation(spec, tmp_path / "out", log=lines.append, command_for=fake_trainer)
    assert again == res
    assert (tmp_path / "out" / "runs" / "prose" / "seed-1" / "logs" / "calls").read_text() == "1"
    assert any("done earlier" in ln for ln in lines)


def test_a_failed_run_stops_with_its_log(small_data, fake_trainer, tmp_path):
    from pretrain.ablate.ablation import run_ablation
    from pretrain.ablate.runs import RunFailed

    bad = curated_folder(small_data["tmp"] / "fail", ["fail fail fail fail"])
    spec = spec_from_dict(spec_table(small_data, tokens=8 * 1024, variants=[
        {"name": "prose", "curated": [str(small_data["prose"])]}, {"name": "shuffled", "curated": [str(bad)]}]))
    with pytest.raises(RunFailed, match=r"shuffled seed 1 failed \(exit code 1\)(.|\n)*boom: the data is bad"):
        run_ablation(spec, tmp_path / "out", log=lambda _: None, command_for=fake_trainer)


def test_an_output_folder_belongs_to_one_spec(small_data, fake_trainer, tmp_path):
    from pretrain.ablate.ablation import run_ablation

    spec = spec_from_dict(spec_table(small_data, tokens=8 * 1024))
    run_ablation(spec, tmp_path / "out", log=lambda _: None, command_for=fake_trainer)
    other = spec_from_dict(spec_table(small_data, tokens=16 * 1024))
    with pytest.raises(ConfigError, match="another spec \\(changed: tokens\\)"):
        run_ablation(other, tmp_path / "out", log=lambda _: None, command_for=fake_trainer)


# --- end to end: real text, real training ----------------------------------------------------------------

def ablate(spec: Path, out: Path, *extra: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pretrain", "ablate", str(spec), "--output", str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800, **kw)


@pytest.fixture(scope="module")
def uninterrupted(prose_data):
    spec = write_spec(prose_data["tmp"] / "spec.toml", spec_table(prose_data))
    out = prose_data["tmp"] / "uninterrupted"
    proc = ablate(spec, out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"spec": spec, "out": out, "stdout": proc.stdout,
            "results": json.loads((out / "results.json").read_text())}


@pytest.mark.slow
def test_prose_trains_a_better_model_than_shuffled_words(uninterrupted):
    res = uninterrupted["results"]
    by_metric = {c["metric"]: c for c in res["comparisons"]}
    bpb = by_metric["prose/bits_per_byte"]
    assert bpb["variant"] == "prose" and bpb["baseline"] == "shuffled"
    assert bpb["delta"] < 0 and bpb["verdict"] == "better", res
    assert res["tokens"] == 24 * 1024 and all(r["tokens"] == 24 * 1024 for v in res["variants"] for r in v["runs"])
    assert res["contamination"]["prose"]["items"] == 16
    out = uninterrupted["stdout"]
    assert "**better**" in out and "contamination: prose:" in out and "[4/4] shuffled seed 2" in out
    assert (uninterrupted["out"] / "curves" / "prose_bits_per_byte.png").is_file()


@pytest.mark.slow
def test_sigkill_then_rerun_gives_the_same_results(uninterrupted, prose_data):
    out = prose_data["tmp"] / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", "ablate", str(uninterrupted["spec"]), "--output",
                             str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = out / "runs" / "prose" / "seed-2"
    deadline = time.monotonic() + 900
    try:  # killed once the second run has saved a checkpoint (`latest` points at it) and before it is done
        while not (second / "checkpoints" / "latest").exists() and proc.poll() is None:
            assert time.monotonic() < deadline, "the second run never saved a checkpoint"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (out / "runs" / "prose" / "seed-1" / "DONE.json").is_file() and not (second / "DONE.json").exists()
    assert not (out / "results.json").exists()
    rerun = ablate(uninterrupted["spec"], out)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert "[1/4] prose seed 1" in rerun.stdout and "done earlier" in rerun.stdout
    assert "resumed from" in (second / "train.log").read_text()
    assert json.loads((out / "results.json").read_text()) == uninterrupted["results"]


@pytest.mark.slow
def test_ray_executor_gives_the_same_results(uninterrupted, prose_data):
    ray = pytest.importorskip("ray")
    from pretrain.ablate.ablation import run_ablation

    spec = load_spec(uninterrupted["spec"])
    out = prose_data["tmp"] / "ray"
    try:
        res = run_ablation(spec, out, executor="ray", ray_cpus=2, log=lambda _: None)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    # the same runs and verdicts; values equal to float rounding: Ray gives each task's processes one thread
    # (OMP_NUM_THREADS = its num_cpus), which changes the order of float sums in torch
    assert same_within(json.loads(json.dumps(res)), uninterrupted["results"], rel=1e-4)
    assert [c["verdict"] for c in res["comparisons"]] == [c["verdict"] for c in uninterrupted["results"]["comparisons"]]


def same_within(a, b, rel: float) -> bool:
    """``a == b`` with floats compared to a relative tolerance."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_within(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_within(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=rel)
    return a == b


def test_leftover_trainers_of_a_run_are_stopped(tmp_path):
    from pretrain.ablate.runs import kill_leftovers

    if not Path("/proc").is_dir():
        pytest.skip("needs /proc")
    config = str(tmp_path / "runs" / "a" / "seed-1" / "config.toml")
    other = str(tmp_path / "runs" / "a" / "seed-2" / "config.toml")
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)", "-m", "pretrain", "train", "--config"]
    mine, theirs = subprocess.Popen(sleeper + [config]), subprocess.Popen(sleeper + [other])
    try:
        assert kill_leftovers(config, wait=20) == [mine.pid]
        assert mine.wait(timeout=20) == -signal.SIGKILL
        assert theirs.poll() is None  # another run's trainer is left alone
    finally:
        theirs.kill()
        theirs.wait()


def test_a_folder_two_variants_share_is_tokenized_once(small_data, fake_trainer, tmp_path):
    from pretrain.ablate.ablation import run_ablation
    from pretrain.data.blend_spec import load_blend_spec
    from pretrain.data.indexed import IndexedDataset

    a, b = str(small_data["prose"]), str(small_data["shuffled"])
    spec = spec_from_dict(spec_table(small_data, tokens=8 * 1024, seeds=[1], variants=[
        {"name": "prose", "curated": [a]}, {"name": "shuffled", "curated": [a, b], "weights": [1, 3]}]))
    res = run_ablation(spec, tmp_path / "out", log=lambda _: None, command_for=fake_trainer)
    assert len(list((tmp_path / "out" / "data" / "tokens").glob("*.bin"))) == 2
    blend = load_blend_spec(str(tmp_path / "out" / "data" / "shuffled" / "blend.toml"))
    assert [d.weight for d in blend.datasets] == [0.25, 0.75] and blend.split == "100,0,0"
    natural = load_blend_spec(str(tmp_path / "out" / "data" / "prose" / "blend.toml"))
    assert natural.datasets[0].prefix == blend.datasets[0].prefix and IndexedDataset(natural.datasets[0].prefix).num_tokens
    assert res["comparisons"][0]["verdict"] == stats.ONE_SEED


def test_a_layout_of_several_processes_runs_under_torchrun():
    from pretrain.ablate.runs import Run, command

    one = command(Run("a", 1, "/x/runs/a/seed-1", 10, 100, 1, False))
    assert one[1:] == ["-m", "pretrain", "train", "--config", "/x/runs/a/seed-1/config.toml"]
    two = command(Run("a", 1, "/x/runs/a/seed-1", 10, 100, 2, False))
    assert two[1:7] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]
    assert two[-4:] == ["pretrain", "train", "--config", "/x/runs/a/seed-1/config.toml"]


@pytest.mark.slow
def test_tensor_parallel_runs_end_to_end(prose_data):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("a tp=2 run needs 2 cores")
    table = spec_table(prose_data, tokens=8 * 1024, seeds=[1], eval_points=1, overrides=["parallel.tp=2"])
    spec = write_spec(prose_data["tmp"] / "tp2.toml", table)
    out = prose_data["tmp"] / "tp2"
    proc = ablate(spec, out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "world 2 = tp 2" in (out / "runs" / "prose" / "seed-1" / "train.log").read_text()
    res = json.loads((out / "results.json").read_text())
    assert res["comparisons"][0]["verdict"] == stats.ONE_SEED and res["variants"][0]["runs"][0]["tokens"] == 8192

"""The same pipeline file on a local Ray instance gives the same shards as the local process pool."""
import json

import pytest

from curate.executors import WorkerLost
from curate.executors.local import LocalExecutor
from curate.pipeline import load_pipeline
from curate.runner import run_pipeline

PIPELINE = """
[pipeline]
name = "ray-test"
output = "unused"
shard_rows = 40
[[sources]]
path = "{sample}/prose.jsonl.gz"
[[sources]]
path = "{sample}/fortunes.jsonl.gz"
[[stages]]
type = "normalize"
[[stages]]
type = "exact_dedup"
"""


def digests(out):
    m = json.loads((out / "manifest.json").read_text())
    return {e["path"]: (e["rows"], e["sha256"]) for e in m["shards"] + m["dropped"]}


@pytest.mark.slow
def test_ray_executor_matches_local(tmp_path, sample_dir, monkeypatch):
    ray = pytest.importorskip("ray")
    # a leftover cluster's address in the environment: the local Ray is still started here (Ray used to attach
    # to it and raise "When connecting to an existing cluster, num_cpus and num_gpus must not be provided")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    from curate.executors.ray import RayExecutor

    p = tmp_path / "p.toml"
    p.write_text(PIPELINE.format(sample=sample_dir))
    local_stats = run_pipeline(load_pipeline(p, output=str(tmp_path / "local")), LocalExecutor(1), progress=False)
    ex = RayExecutor(workers=2, max_retries=1)
    try:
        ray_stats = run_pipeline(load_pipeline(p, output=str(tmp_path / "ray")), ex, progress=False)
        # a task whose worker crashes every time (a library failing on its input): on_crash's result, the
        # other tasks' results as usual; without on_crash the run stops naming the task
        def crash_on_3(x):
            if x == 3:
                import ctypes

                ctypes.string_at(0)  # SIGSEGV
            return x * 10

        blamed = []
        assert ex.map(crash_on_3, range(6), on_crash=lambda item, why: blamed.append(why) or -1) == [0, 10, 20, -1, 40, 50]
        # Ray says only that the worker died; the task's run alone in a child process says how
        assert len(blamed) == 1 and "died 2 times" in blamed[0] and "SIGSEGV" in blamed[0], blamed
        with pytest.raises(WorkerLost, match="3; max_retries = 1"):
            ex.map(crash_on_3, range(6))

        # a worker killed every time (SIGKILL: out of memory?) is not the input's fault: the run stops naming
        # the task, on_crash or not, as with the local executor
        def killed_on_2(x):
            if x == 2:
                import os
                import signal

                os.kill(os.getpid(), signal.SIGKILL)
            return x

        with pytest.raises(WorkerLost, match="SIGKILL") as e:
            ex.map(killed_on_2, range(4), on_crash=lambda item, why: -1)
        assert "2" in str(e.value) and "out of memory" in str(e.value)

        # a worker that died every time, but not when the task ran alone in the child: the child's result, or
        # the child's exception raised as the task's own
        def dies_in_workers(x):
            import ctypes
            import sys

            if x == 1 and "child_call" not in sys.argv[0]:
                ctypes.string_at(0)
            return x + 1

        assert ex.map(dies_in_workers, range(3), on_crash=lambda item, why: -1) == [1, 2, 3]

        def raises_in_child(x):
            import ctypes
            import sys

            if x == 1:
                if "child_call" not in sys.argv[0]:
                    ctypes.string_at(0)
                raise ValueError("bad item 1")
            return x

        with pytest.raises(ValueError, match="bad item 1"):
            ex.map(raises_in_child, range(3), on_crash=lambda item, why: -1)
    finally:
        ex.close()
    assert digests(tmp_path / "ray") == digests(tmp_path / "local")
    strip = lambda st: [{k: v for k, v in s.items() if k != "plan"} for s in st["stages"]]
    assert strip(ray_stats) == strip(local_stats)


ALL_STAGES = """
[pipeline]
name = "ray-cluster"
output = "unused"
shard_rows = 40
max_retries = 5
[[sources]]
path = "{sample}/*.warc.gz"
[[sources]]
path = "{sample}/prose.jsonl.gz"
[[stages]]
type = "extract"
[[stages]]
type = "normalize"
[[stages]]
type = "langid"
languages = ["en"]
threshold = 0.65
[[stages]]
type = "gopher_quality"
[[stages]]
type = "gopher_repetition"
[[stages]]
type = "c4_quality"
[[stages]]
type = "fineweb_quality"
[[stages]]
type = "exact_dedup"
[[stages]]
type = "minhash_dedup"
threshold = 0.8
[[stages]]
type = "decontaminate"
eval_files = ["{sample}/eval_passages.jsonl"]
ngram = 13
"""


class NodeKiller:
    """Wraps an executor; removes a worker node (not gracefully) once a few tasks of a large map finished,
    while the others of that map are still running or queued."""

    def __init__(self, inner, cluster, node, after: int = 3, min_items: int = 8):
        self.inner, self.cluster, self.node = inner, cluster, node
        self.after, self.min_items, self.removed = after, min_items, False

    def map(self, fn, items, desc=None, on_result=None):
        items = list(items)
        if self.removed or len(items) < self.min_items:
            return self.inner.map(fn, items, desc=desc, on_result=on_result)
        seen = 0

        def hook(result):
            nonlocal seen
            seen += 1
            if seen == self.after and not self.removed:
                self.cluster.remove_node(self.node, allow_graceful=False)
                self.removed = True
            if on_result:
                on_result(result)

        return self.inner.map(fn, items, desc=desc, on_result=hook)


@pytest.mark.slow
def test_three_node_cluster_whole_stage_list_matches_local_also_when_a_node_dies(tmp_path, sample_dir):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from curate.executors.ray import RayExecutor

    p = tmp_path / "p.toml"
    p.write_text(ALL_STAGES.format(sample=sample_dir))
    local_stats = run_pipeline(load_pipeline(p, output=str(tmp_path / "local")), LocalExecutor(1), progress=False)
    expected = digests(tmp_path / "local")
    strip = lambda st: [{k: v for k, v in s.items() if k != "plan"} for s in st["stages"]]

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        ex = RayExecutor(max_retries=5)
        assert ex._limit() == 12  # 4 tasks in flight per cluster CPU
        stats = run_pipeline(load_pipeline(p, output=str(tmp_path / "ray")), ex, progress=False)
        assert digests(tmp_path / "ray") == expected
        assert strip(stats) == strip(local_stats)

        killer = NodeKiller(ex, cluster, workers[0])
        stats = run_pipeline(load_pipeline(p, output=str(tmp_path / "ray-node-lost")), killer, progress=False)
        assert killer.removed
        assert digests(tmp_path / "ray-node-lost") == expected
        assert strip(stats) == strip(local_stats)
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_ray_address_where_nothing_answers_fails_at_once_saying_what_to_do():
    import socket
    import time

    from curate.executors.ray import check_address
    from curate.pipeline import ConfigError

    with socket.socket() as s:  # a port that was just free: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.time()
    with pytest.raises(ConfigError, match="no Ray cluster answers there.*ray start --head"):
        check_address(f"127.0.0.1:{port}")
    assert time.time() - t0 < 10  # not ray.init's minutes of retries
    for bad in ("garbage::x", "10.0.0.1", "host:99999", ":6379"):
        with pytest.raises(ConfigError, match="HOST:PORT"):
            check_address(bad)
    with socket.socket() as s:  # something listening: the address is handed to ray.init
        s.bind(("127.0.0.1", 0))
        s.listen()
        check_address(f"127.0.0.1:{s.getsockname()[1]}")
        check_address(f"ray://127.0.0.1:{s.getsockname()[1]}")
    check_address("auto")
    check_address("local")  # ray.init starts a cluster here: nothing to reach


def _exits(code):
    import sys

    sys.exit(code)


def _segfaults(_):
    import ctypes

    ctypes.string_at(0)


def test_a_task_run_in_a_child_says_how_it_ended():
    """What the Ray executor reads when a task killed its worker every time: a result, the task's own error (a
    library calling sys.exit is one too, not a kill), or the signal that ended the child."""
    pytest.importorskip("ray")
    from curate.executors.child_call import run_in_child

    assert run_in_child(lambda x: x * 2, 21) == ("ok", 42)
    how, err = run_in_child(int, "not a number")
    assert how == "raised" and isinstance(err, ValueError)
    how, err = run_in_child(_exits, 3)
    assert how == "raised" and "sys.exit(3)" in str(err)
    assert run_in_child(_segfaults, None) == ("signal", 11)


@pytest.mark.slow
def test_the_commands_signal_handlers_survive_starting_ray(tmp_path):
    """``ray.init`` installs Ray's own failure handler, which answered SIGTERM with a crash dump and exit 134/15;
    ``curate run`` and ``pretrain tokenize`` end in one line with 143 (their pools shut down). After connecting,
    SIGTERM reaches the handler the command had set."""
    pytest.importorskip("ray")
    import subprocess
    import sys

    script = tmp_path / "term.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "got = []\n"
        "signal.signal(signal.SIGTERM, lambda *a: got.append(1))\n"
        "from curate.executors.ray import connect_ray\n"
        "ray, started = connect_ray(None, 1)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(1)\n"
        "ray.shutdown()\n"
        "sys.exit(0 if got else 3)\n")
    import os
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "SIGTERM received" not in done.stderr

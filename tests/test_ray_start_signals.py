"""SIGTERM while ``curate run --executor ray`` starts Ray: the command's own end (one line, exit 143), never Ray's
(``sys.exit(15)`` from the handler ``ray.init`` sets, or the crash dump of Ray's C++ failure handler), and no
Ray process left running."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PIPELINE = """
[pipeline]
name = "ray-sigterm"
output = "{out}"
[[sources]]
path = "{sample}/fortunes.jsonl.gz"
[[stages]]
type = "normalize"
"""

# `curate run`, with a pause (and a marker file saying it began) at one point inside ray.init
WRAPPER = """
import sys, time
from pathlib import Path
import ray._private.node, ray._private.worker

marker, where = Path(sys.argv.pop(1)), sys.argv.pop(1)

def paused(original):
    def call(*args, **kwargs):
        if where == "before":
            marker.write_text("x")
            time.sleep(1.5)
        result = original(*args, **kwargs)
        if where == "after":
            marker.write_text("x")
            time.sleep(1.5)
        return result
    return call

if where == "before":  # Ray's Python SIGTERM handler set, the node's processes not started yet
    ray._private.node.Node.__init__ = paused(ray._private.node.Node.__init__)
else:  # the driver's core worker made (Ray's C++ failure handler with it), ray.init not returned yet
    ray._private.worker.connect = paused(ray._private.worker.connect)

from curate.cli import main
sys.exit(main())
"""


def _session(sid: int) -> list[str]:
    """The processes (not zombies) of session ``sid``: their command names."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().rsplit(b")", 1)
            name = fields[0].split(b"(", 1)[1].decode(errors="replace")
            state, _ppid, _pgrp, session = fields[1].split()[:4]
        except (OSError, IndexError, ValueError):
            continue
        if int(session) == sid and state not in (b"Z", b"X"):
            found.append(name)
    return found


@pytest.mark.parametrize("where", ["before", "after"])
def test_sigterm_while_ray_starts_ends_the_command_as_usual(tmp_path, sample_dir, where):
    pytest.importorskip("ray")
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(PIPELINE.format(out=tmp_path / "out", sample=sample_dir))
    wrapper, marker = tmp_path / "wrapper.py", tmp_path / "ray-init-began"
    wrapper.write_text(WRAPPER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": "", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(wrapper), str(marker), where, "run", str(pipeline),
                             "--executor", "ray", "--workers", "1", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # (its session: what Ray starts is found by it)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "ray.init did not get there"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        left = _session(proc.pid)
        deadline = time.monotonic() + 10  # (processes being reaped)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _session(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _session_pids(proc.pid):  # what the test started, should the command have left it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 143, err[-3000:]
    said = [line for line in err.splitlines() if line.startswith("curate run:")]
    assert said == ["curate run: terminated (SIGTERM); rerun the same command to resume: finished tasks are kept"], err
    assert "SIGTERM received" not in err and "Traceback" not in err, err[-3000:]
    assert left == [], f"Ray processes left running: {left}"


def _session_pids(sid: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_bytes().rsplit(b")", 1)[1].split()[3]) == sid:
                pids.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def test_ctrl_c_while_ray_starts_waits_for_it_then_interrupts_with_ray_shut_down():
    """In process, without starting Ray: SIGINT during the start is held back, raised again after it (Python's
    KeyboardInterrupt), with Ray shut down on the way out; Ray's own SIGTERM handler is not set meanwhile."""
    pytest.importorskip("ray")
    from ray._private import utils

    from curate.executors.ray import _raise_again, _signals_deferred

    class FakeRay:
        down = 0

        def is_initialized(self):
            return True

        def shutdown(self):
            self.down += 1

    ray, pending = FakeRay(), []
    before = signal.getsignal(signal.SIGTERM)
    with _signals_deferred(pending):
        rays = lambda *a: None  # noqa: E731
        utils.set_sigterm_handler(rays)  # what ray.init does first
        assert signal.getsignal(signal.SIGTERM) is not rays
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)  # (no KeyboardInterrupt here)
    assert pending == [signal.SIGINT] and signal.getsignal(signal.SIGTERM) is before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        _raise_again(ray, pending[0])
    assert ray.down == 1

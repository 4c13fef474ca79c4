"""One task run in a child Python process, so that how it ended can be told: a Ray worker that died running a
task says only ``WorkerCrashedError``, whether a library crashed on the task's input (SIGSEGV and the like: set
the input aside) or the worker was killed (SIGKILL, out of memory: stop the run). The Ray executor runs a task
whose worker died every time once more this way, inside a Ray worker, and reads the child's exit signal, as the
local executor reads its pool workers'.

The task goes to the child as a file pickled by Ray's cloudpickle (a closure or a lambda is pickled by value;
the task's functions and items are the run's own, never a file found on disk), and its result or exception comes
back the same way. ``python -m curate.executors.child_call TASK RESULT`` is the child's side."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from typing import Callable


def run_in_child(fn: Callable, item) -> tuple[str, object]:
    """``fn(item)`` in a child process: ``("ok", result)``, ``("raised", exception)``, or ``("signal", number)``
    / ``("exit", code)`` when the child ended without a result (a crash or a kill)."""
    from ray import cloudpickle

    with tempfile.TemporaryDirectory(prefix="quarry-task-") as d:
        task, result = os.path.join(d, "task.pkl"), os.path.join(d, "result.pkl")
        with open(task, "wb") as f:
            cloudpickle.dump((fn, item), f)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # the worker's imports
        rc = subprocess.run([sys.executable, "-m", "curate.executors.child_call", task, result], env=env,
                            stdin=subprocess.DEVNULL).returncode
        if rc < 0:
            return "signal", -rc
        if rc != 0 or not os.path.exists(result):
            return "exit", rc
        with open(result, "rb") as f:
            return cloudpickle.load(f)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _main(task: str, result: str) -> int:
    from ray import cloudpickle

    with open(task, "rb") as f:
        fn, item = cloudpickle.load(f)
    try:
        out = ("ok", fn(item))
    except Exception as e:  # noqa: BLE001 - handed back to the caller, which raises it as the task's error
        out = ("raised", e)
    except SystemExit as e:  # a library that calls sys.exit: an error of the task, said as such (not a kill)
        out = ("raised", RuntimeError(f"the task called sys.exit({e.code!r})"))
    try:
        data = cloudpickle.dumps(out)
    except Exception as e:  # noqa: BLE001 - an exception or result that does not pickle: said in words
        data = cloudpickle.dumps(("raised", RuntimeError(f"{out[0]} {str(out[1])[:2000]!r}; not picklable ({e})")))
    with open(result + ".tmp", "wb") as f:
        f.write(data)
    os.replace(result + ".tmp", result)
    return 0


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:3]))

"""Watch a command's process tree from /proc: CPU seconds, peak RSS (summed over the tree), the peak size
of a folder it writes (and what was in it then), and a timeline of how many of its processes wanted a core.
Used by the corpus benchmarks; Linux only (no psutil needed).

``runnable`` counts the tree's processes in state R (running, or ready and waiting for a core) at each
sample: unlike CPU seconds / wall, it does not drop when other jobs on a shared machine take the cores, so
its mean says whether the run itself keeps every worker busy."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Usage:
    started: float = 0.0        # time.time() at the start
    wall: float = 0.0
    cpu: float = 0.0            # user + system seconds of every process of the tree
    peak_rss: int = 0           # bytes, the largest sum of resident memory over the tree at one sample
    peak_folder: int = 0        # bytes under the watched folder at its largest
    end_folder: int = 0
    returncode: int = 0
    cpu_by_pid: dict = field(default_factory=dict)
    samples: list = field(default_factory=list)      # (seconds since start, runnable processes, folder bytes)
    peak_breakdown: dict = field(default_factory=dict)  # bytes per folder (two levels down) at the peak

    @property
    def runnable(self) -> float:
        """Mean number of the tree's processes that wanted a core."""
        return sum(r for _, r, _ in self.samples) / max(len(self.samples), 1)

    def runnable_between(self, a: float, b: float) -> float:
        inside = [r for t, r, _ in self.samples if a <= t <= b]
        return sum(inside) / len(inside) if inside else float("nan")


def _procs() -> dict[int, tuple[int, float, int, str]]:
    """pid -> (ppid, cpu seconds, rss bytes, state) for every process we can read."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        ppid, utime, stime, rss = int(fields[1]), int(fields[11]), int(fields[12]), int(fields[21])
        out[int(name)] = (ppid, (utime + stime) / TICK, rss * PAGE, fields[0])
    return out


def folder_breakdown(path: str, depth: int = 2) -> dict[str, int]:
    """Bytes under ``path`` per sub-folder ``depth`` levels down (files above that count under their folder)."""
    out: dict[str, int] = {}
    for dirpath, _, files in os.walk(path):
        rel = os.path.relpath(dirpath, path)
        key = "/".join(rel.split(os.sep)[:depth]) if rel != "." else "."
        for name in files:
            try:
                out[key] = out.get(key, 0) + os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return out


def folder_bytes(path: str) -> int:
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
        except OSError:
            pass
    return total


def run_watched(cmd: list[str], folder: str, interval: float = 0.25, **kw) -> Usage:
    usage = Usage()
    t0 = usage.started = time.time()
    proc = subprocess.Popen(cmd, **kw)
    done = threading.Event()

    def sample():
        while not done.is_set():
            procs = _procs()
            tree, frontier = {proc.pid}, [proc.pid]
            children: dict[int, list[int]] = {}
            for pid, (ppid, *_rest) in procs.items():
                children.setdefault(ppid, []).append(pid)
            while frontier:
                for c in children.get(frontier.pop(), []):
                    if c not in tree:
                        tree.add(c)
                        frontier.append(c)
            rss, runnable = 0, 0
            for pid in tree:
                if pid in procs:
                    usage.cpu_by_pid[pid] = max(usage.cpu_by_pid.get(pid, 0.0), procs[pid][1])
                    rss += procs[pid][2]
                    runnable += procs[pid][3] == "R" and pid != os.getpid()
            usage.peak_rss = max(usage.peak_rss, rss)
            size = folder_bytes(folder)
            usage.samples.append((time.time() - t0, runnable, size))
            if size > usage.peak_folder:
                usage.peak_folder = size
                usage.peak_breakdown = folder_breakdown(folder)
            done.wait(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    usage.returncode = proc.wait()
    done.set()
    th.join()
    usage.wall = time.time() - t0
    usage.cpu = sum(usage.cpu_by_pid.values())
    usage.end_folder = folder_bytes(folder)
    usage.peak_folder = max(usage.peak_folder, usage.end_folder)
    return usage

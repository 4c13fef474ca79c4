"""Watch a command's process tree from /proc: CPU seconds, peak RSS (summed over the tree), and the peak
size of a folder it writes. Used by the corpus benchmarks; Linux only (no psutil needed)."""
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
    wall: float = 0.0
    cpu: float = 0.0            # user + system seconds of every process of the tree
    peak_rss: int = 0           # bytes, the largest sum of resident memory over the tree at one sample
    peak_folder: int = 0        # bytes under the watched folder at its largest
    end_folder: int = 0
    returncode: int = 0
    cpu_by_pid: dict = field(default_factory=dict)


def _procs() -> dict[int, tuple[int, float, int]]:
    """pid -> (ppid, cpu seconds, rss bytes) for every process we can read."""
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
        out[int(name)] = (ppid, (utime + stime) / TICK, rss * PAGE)
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
    t0 = time.time()
    proc = subprocess.Popen(cmd, **kw)
    done = threading.Event()

    def sample():
        while not done.is_set():
            procs = _procs()
            tree, frontier = {proc.pid}, [proc.pid]
            children: dict[int, list[int]] = {}
            for pid, (ppid, _, _) in procs.items():
                children.setdefault(ppid, []).append(pid)
            while frontier:
                for c in children.get(frontier.pop(), []):
                    if c not in tree:
                        tree.add(c)
                        frontier.append(c)
            rss = 0
            for pid in tree:
                if pid in procs:
                    usage.cpu_by_pid[pid] = max(usage.cpu_by_pid.get(pid, 0.0), procs[pid][1])
                    rss += procs[pid][2]
            usage.peak_rss = max(usage.peak_rss, rss)
            usage.peak_folder = max(usage.peak_folder, folder_bytes(folder))
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

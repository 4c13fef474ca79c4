"""A read of a dataset of parts checks the ``.bin`` of the parts it reads, not of every part (two system calls per part
per read: 0.6 ms per ``ds[i]`` at 200 parts). The parts it names must be all those the gather reads: a part cut short
under a read it missed would be a SIGBUS. So, in a child process: every part but those named is cut to nothing, the
samples still read the same (no SIGBUS), and cutting a part a read names is an error naming it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import os, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, "tests")
from test_gpt_dataset import write_parts
from pretrain.data.gpt_dataset import CHECK_ALL_PARTS, build_gpt_dataset
from pretrain.data.indexed import DataChangedError, data_file_path

folder, single = sys.argv[1], sys.argv[2] == "single"
rng = np.random.default_rng(0)
lengths = rng.integers(0, 90, 300)  # empty documents too, some at the parts' edges
tokens = rng.integers(0, 500, int(lengths.sum())).astype(np.uint16)
cuts = [20, 20, 60, 100, 150, 151, 200, 250, 299]  # an empty part, a part of one document
ix = write_parts(Path(folder), tokens, lengths, cuts, np.uint16)
assert len(ix.parts) > CHECK_ALL_PARTS
ds = build_gpt_dataset(ix, "100,0,0", "train", 40, 64, seed=3)
idx = np.array([7]) if single else np.array([3, 17, 5])
read = lambda: np.stack([ds[int(i)] for i in idx]) if single else ds.get_batch(idx)
want = read()
named = ds._parts_read(idx)
assert 0 < len(named) < len(ix.parts), named
for p, part in enumerate(ix.parts):
    if p not in named:
        os.truncate(data_file_path(part.prefix), 0)
assert (read() == want).all()  # no part it reads was cut: same samples, no SIGBUS
cut = ix.parts[min(p for p in named if len(ix.parts[p].tokens))]
os.truncate(data_file_path(cut.prefix), 0)
try:
    read()
except DataChangedError as e:
    print(e)
    sys.exit(3)
"""


def _run(tmp_path, how):
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "parts"), how], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_a_batch_checks_the_parts_it_reads_and_only_those(tmp_path):
    r = _run(tmp_path, "batch")
    assert r.returncode == 3, (r.returncode, r.stderr[-3000:])
    assert "shrank while in use" in r.stdout


def test_a_sample_checks_the_parts_it_reads_and_only_those(tmp_path):
    r = _run(tmp_path, "single")
    assert r.returncode == 3, (r.returncode, r.stderr[-3000:])
    assert "shrank while in use" in r.stdout

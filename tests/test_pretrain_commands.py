"""The `pretrain` commands and what a user sees: `--help` starts without importing torch (each command imports
its libraries in ``run``), the defaults a command repeats to stay light equal the library's, the `--help`
examples parse and name the demo's paths, export-hf writes ordinary file modes, the first training step is
printed at once, MFU above a measured peak is not printed as utilisation, the funnel's colours."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HELP_WITHOUT_TORCH = """
import sys
from pretrain.cli import COMMANDS, main
for argv in [["--help"]] + [[name, "--help"] for name in COMMANDS]:
    try:
        main(argv)
    except SystemExit:
        pass
heavy = sorted(m for m in ("torch", "sentencepiece", "numba", "matplotlib", "transformers") if m in sys.modules)
print("HEAVY", heavy)
"""


def test_help_of_every_command_imports_no_heavy_library():
    out = subprocess.run([sys.executable, "-c", HELP_WITHOUT_TORCH], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout[-500:]
    for name in ("tokenizer", "tokenize", "blend", "train", "generate", "export-hf", "report"):
        assert name in out.stdout


def test_export_writes_every_file_with_the_mode_of_an_ordinary_write(tmp_path):
    from pretrain.export_hf import export_model
    from tests.test_export_hf import ARCHS, tiny_model

    model, cfg = tiny_model(**ARCHS["gpt2"])
    old = os.umask(0o022)
    try:
        out = export_model(model, cfg, tmp_path / "hf")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir() if p.is_file()}
    assert "model.safetensors" in modes and set(modes.values()) == {0o644}, modes


def test_the_first_step_of_a_run_is_printed_at_once(capsys):
    from pretrain.train import train
    from tests.distributed_helpers import tiny_config

    res = train(tiny_config({"train.steps": 3, "log.interval": 5}))
    out = capsys.readouterr().out
    assert sorted(res["losses"]) == [1, 2, 3]
    assert "step 1 | loss" in out and "step 2 |" not in out


def test_mfu_above_a_measured_peak_is_not_printed_as_utilisation():
    from pretrain.metrics import utilisation_text
    from pretrain.report import mfu_text

    above = utilisation_text({"mfu": 1.1, "hfu": 1.1, "tflops_per_device": 0.05}, "measured matmul peak")
    assert above == ["mfu n/a (0.05 TFLOP/s, above the measured matmul peak)"]
    assert utilisation_text({"mfu": 0.25, "hfu": 0.5, "tflops_per_device": 0.05}, "x") == ["mfu 25.00%",
                                                                                        "hfu 50.00% of x"]
    assert mfu_text(1.1157).startswith("n/a") and "%" not in mfu_text(1.1157)
    assert mfu_text(0.0121) == "1.21%" and mfu_text(None) == "-"


def test_funnel_gives_a_reason_one_colour_in_every_panel():
    from pretrain.report import KEPT_COLOUR, reason_colours

    web = {"stages": [{"dropped": {"language": 5, "short": 2}}, {"dropped": {"dup": 1, "zero": 0}}]}
    books = {"stages": [{"dropped": {"dup": 3, "language": 9}}]}
    many = {"stages": [{"dropped": {f"r{i}": 1 for i in range(40)}}]}
    colours = reason_colours([web, books, many])
    assert set(colours) == {"language", "short", "dup", *(f"r{i}" for i in range(40))}  # "zero" dropped nothing
    assert reason_colours([web])["language"] == colours["language"] == reason_colours([web, books])["language"]
    assert len(set(colours.values())) == len(colours)  # no two reasons alike
    assert KEPT_COLOUR not in {c for c, _ in colours.values()}

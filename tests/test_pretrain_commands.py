"""The `pretrain` commands: `--help` starts without importing torch (each command imports its libraries in
``run``), the defaults a command repeats to stay light equal the library's, and export-hf writes ordinary file
modes."""
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


def test_defaults_repeated_by_the_commands_equal_the_libraries():
    from pretrain.commands import blend as blend_cmd
    from pretrain.commands import tokenizer as tokenizer_cmd
    from pretrain.data import blend, gpt_dataset, tokenizer

    assert tokenizer_cmd.DEFAULT_MAX_BYTES == tokenizer.DEFAULT_MAX_BYTES
    assert blend_cmd.DEFAULT_SEED == blend.DEFAULT_SEED
    assert blend_cmd.DEFAULT_MAX_EPOCHS == blend.DEFAULT_MAX_EPOCHS
    assert tuple(blend_cmd.ORDERS) == tuple(gpt_dataset.ORDERS)


def test_export_writes_every_file_with_the_mode_of_an_ordinary_write(tmp_path):
    from tests.test_export_hf import ARCHS, tiny_model

    from pretrain.export_hf import export_model

    model, cfg = tiny_model(**ARCHS["gpt2"])
    old = os.umask(0o022)
    try:
        out = export_model(model, cfg, tmp_path / "hf")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir() if p.is_file()}
    assert "model.safetensors" in modes and set(modes.values()) == {0o644}, modes

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SAMPLE = ROOT / "pipelines" / "sample"

os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def sample_dir() -> Path:
    return SAMPLE

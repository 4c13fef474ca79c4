"""A ``.zst`` eval file cut short is refused, as a ``.gz`` one is: the decompressing reader stopped at the cut
without a word, and the items before it were scored as if they were the whole task."""
import io
import json

import pytest
import zstandard

from pretrain.eval.tasks import EvalDataError, TaskSpec, read_items

ROWS = "".join(json.dumps({"context": f"Question {i}?", "choices": ["yes", "no"], "label": i % 2}) + "\n"
               for i in range(3000)).encode()


def _streamed() -> bytes:  # one frame per 10,000 bytes, as a streaming writer flushing frames leaves it
    buf = io.BytesIO()
    w = zstandard.ZstdCompressor(level=3).stream_writer(buf, closefd=False)
    for i in range(0, len(ROWS), 10_000):
        w.write(ROWS[i:i + 10_000])
        w.flush(zstandard.FLUSH_FRAME)
    w.close()
    return buf.getvalue()


@pytest.mark.parametrize("make", [lambda: zstandard.ZstdCompressor(write_checksum=True).compress(ROWS), _streamed])
def test_a_truncated_zst_task_file_is_refused(tmp_path, make):
    data = make()
    whole = tmp_path / "whole.jsonl.zst"
    whole.write_bytes(data)
    assert len(read_items(TaskSpec("t", "choice", str(whole))).items) == 3000
    half = tmp_path / "half.jsonl.zst"
    half.write_bytes(data[:len(data) // 2 + 7])
    with pytest.raises(EvalDataError, match="truncated"):
        read_items(TaskSpec("t", "choice", str(half)))


def test_bytes_after_the_zst_frames_are_refused(tmp_path):
    f = tmp_path / "tail.jsonl.zst"
    f.write_bytes(zstandard.ZstdCompressor().compress(ROWS) + b"appended text\n")
    with pytest.raises(EvalDataError, match="not a zstd frame"):
        read_items(TaskSpec("t", "choice", str(f)))

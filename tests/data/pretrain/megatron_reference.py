"""Build GPT/blend indices with Megatron-core itself and save them, for tests/test_gpt_dataset.py.

Run with an interpreter that has megatron-core (0.19.x needs Python >= 3.12), e.g.
    QUARRY_MEGATRON_PYTHON=/path/to/py312/bin/python pytest tests/test_gpt_dataset.py -k megatron
Usage: python megatron_reference.py JOB.json OUT_DIR
JOB.json (or a list of them, written to OUT_DIR/<i>/): {"blend": [[prefix, ...], [weight, ...] or null], "split": "969,30,1", "seq_len": S,
           "sizes": [train, valid, test], "seed": X}
Writes OUT_DIR/<split>/<k>/{document_index,sample_index,shuffle_index}.npy for the k-th dataset and
OUT_DIR/<split>/{dataset_index,dataset_sample_index}.npy for a blend; also checks IndexedDataset reads.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy  # noqa: E402
from megatron.core.datasets.blended_dataset import BlendedDataset  # noqa: E402
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder  # noqa: E402
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder  # noqa: E402


class _Tok:
    """The least a GPTDatasetConfig needs from a tokenizer."""
    eod = 2
    pad = 1_000_000  # not a token of the test data (Megatron zeroes pad ids in samples)
    vocab_size = None
    unique_identifiers = {"class": "QuarryTestTokenizer"}


def main(job_path, out):
    jobs = json.load(open(job_path))
    if isinstance(jobs, dict):
        build(jobs, out)
    else:  # a list of jobs: OUT_DIR/<i>/...
        for i, job in enumerate(jobs):
            build(job, os.path.join(out, str(i)))


def build(job, out):
    os.makedirs(out, exist_ok=True)
    prefixes, weights = job["blend"]
    config = GPTDatasetConfig(
        random_seed=job["seed"], sequence_length=job["seq_len"], blend=(prefixes, weights),
        split=job["split"], path_to_cache=os.path.join(out, "megatron_cache"), tokenizer=_Tok(),
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
    )
    sizes = list(job["sizes"])
    datasets = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()
    report = {"indexed": {}}
    for k, p in enumerate(prefixes):
        ds = IndexedDataset(p)
        report["indexed"][p] = {"len": len(ds), "documents": len(ds.document_indices) - 1,
                                "dtype": numpy.dtype(ds.index.dtype).name, "first": ds[0].tolist(),
                                "last": ds[len(ds) - 1].tolist(),
                                "document_indices": numpy.asarray(ds.document_indices).tolist()}
        # the same documents written again by Megatron's own builder: OUT/rebuilt_<k>.{bin,idx}
        import torch

        rebuilt = os.path.join(out, f"rebuilt_{k}")
        builder = IndexedDatasetBuilder(rebuilt + ".bin", dtype=ds.index.dtype)
        docs = ds.document_indices
        for d in range(len(docs) - 1):
            seqs = [numpy.asarray(ds[i]) for i in range(docs[d], docs[d + 1])]
            flat = numpy.concatenate(seqs) if seqs else numpy.zeros(0, ds.index.dtype)
            builder.add_document(torch.from_numpy(flat.astype(numpy.int64)), [len(x) for x in seqs])
        builder.finalize(rebuilt + ".idx")
    for name, ds in zip(["train", "valid", "test"], datasets):
        if ds is None or job["sizes"][["train", "valid", "test"].index(name)] == 0:
            continue
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        parts = ds.datasets if isinstance(ds, BlendedDataset) else [ds]
        if isinstance(ds, BlendedDataset):
            numpy.save(os.path.join(d, "dataset_index.npy"), ds.dataset_index)
            numpy.save(os.path.join(d, "dataset_sample_index.npy"), ds.dataset_sample_index)
        for k, g in enumerate(parts):
            os.makedirs(os.path.join(d, str(k)), exist_ok=True)
            for a in ("document_index", "sample_index", "shuffle_index"):
                numpy.save(os.path.join(d, str(k), f"{a}.npy"), getattr(g, a))
        # a few samples' tokens, to compare what __getitem__ returns
        report[name] = {"len": len(ds), "samples": [
            numpy.asarray(ds[i]["tokens"]).tolist() + [int(ds[i]["labels"][-1])] for i in range(min(5, len(ds)))]}
    json.dump(report, open(os.path.join(out, "report.json"), "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

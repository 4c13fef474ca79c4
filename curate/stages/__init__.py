"""The stage registry: pipeline ``type`` -> the class that implements it.

Classes are imported only when a pipeline uses them, so a run without language ID never loads fastText.
"""
from __future__ import annotations

import importlib

STAGES = {
    "extract": "curate.extract.stage:Extract",
    "normalize": "curate.stages.normalize:Normalize",
    "langid": "curate.stages.langid:LangId",
    "gopher_quality": "curate.stages.gopher_quality:GopherQuality",
    "gopher_repetition": "curate.stages.gopher_repetition:GopherRepetition",
    "c4_quality": "curate.stages.c4_quality:C4Quality",
    "fineweb_quality": "curate.stages.fineweb_quality:FineWebQuality",
    "quality_classifier": "curate.stages.quality:QualityClassifier",
    "exact_dedup": "curate.stages.exact_dedup:ExactDedup",
    "minhash_dedup": "curate.stages.minhash.stage:MinHashDedup",
    "decontaminate": "curate.stages.decontaminate:Decontaminate",
}


def stage_class(type_name: str):
    if type_name not in STAGES:
        raise KeyError(type_name)
    module, cls = STAGES[type_name].split(":")
    return getattr(importlib.import_module(module), cls)

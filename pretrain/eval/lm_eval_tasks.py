"""lm-evaluation-harness task files for the same local eval files: ``pretrain eval --write-lm-eval-tasks DIR``.

For each task, DIR gets ``NAME.jsonl`` (the items, in the fields the YAML reads: cloze items split into
``context`` and ``target`` exactly as Quarry splits them) and ``NAME.yaml`` (a task reading it through the
``json`` dataset builder, offline). Then, on ``pretrain export-hf``'s folder::

    lm_eval --model hf --model_args pretrained=EXPORT --include_path DIR --tasks NAME

computes the same figures as ``pretrain eval`` (0-shot; a ``choice`` task's few-shot examples are drawn
differently by lm-eval, so only 0-shot figures compare). The exported tokenizer's BOS is the end-of-document
token, which lm-eval puts before a document (Quarry does the same).
"""
from __future__ import annotations

import json
from pathlib import Path

from pretrain.eval.requests import cloze_pair
from pretrain.eval.tasks import TASK_NAME_RULE, TaskSpec, is_valid_task_name, read_items

YAML = {
    "bpb": """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: text
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
""",
    "cloze": """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood
doc_to_text: context
doc_to_target: target
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
    aggregation: mean
    higher_is_better: true
""",
    "choice": """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: context
doc_to_choice: choices
doc_to_target: label
target_delimiter: " "
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
""",
}


def _yaml_text(kind: str, name: str, data: str) -> str:
    """The YAML of one task: every value written by us is a JSON string (valid YAML, quoted and escaped), so no
    name or path can end a line, add a key or a tag (``!function``)."""
    return YAML[kind].format(name=json.dumps(name), data=json.dumps(data))


def _write(path: Path, text: str) -> None:
    from curate.shards import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def write_lm_eval_tasks(specs: list[TaskSpec], out_dir: str | Path, keep: dict | None = None) -> list[Path]:
    """-> the YAML files written (one per task). ``keep``: {task name: item indices} to write only the items a
    model can score (lm-eval stops on a continuation longer than the model's window; Quarry sets it aside)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in specs:  # checked when tasks are parsed; again here, before anything is written, for any caller
        if not is_valid_task_name(spec.name):
            raise ValueError(f"task name {spec.name!r} is not allowed; a task name is {TASK_NAME_RULE}")
        if spec.kind not in YAML:
            raise ValueError(f"task {spec.name!r}: kind = {spec.kind!r}; choose one of {', '.join(YAML)}")
    for spec in specs:
        if spec.shots:
            raise ValueError(f"task {spec.name!r}: shots = {spec.shots}: lm-eval draws few-shot examples its own "
                             f"way; write 0-shot tasks (lm_eval --num_fewshot N for its own)")
        if spec.stride:
            raise ValueError(f"task {spec.name!r}: stride = {spec.stride}: lm-eval scores disjoint windows only")
        items = read_items(spec).items
        if keep is not None and spec.name in keep:
            items = [it for i, it in enumerate(items) if i in keep[spec.name]]
        if spec.kind == "cloze":
            rows = [dict(zip(("context", "target"), cloze_pair(it["text"]))) for it in items]
        else:
            rows = items
        data = out / f"{spec.name}.jsonl"
        _write(data, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        yaml = out / f"{spec.name}.yaml"
        _write(yaml, _yaml_text(spec.kind, spec.name, str(data.resolve())))
        written.append(yaml)
    return written

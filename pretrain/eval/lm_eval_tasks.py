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


def is_quarry_yaml(path: str | Path, name: str) -> bool:
    """Whether ``path`` is the YAML :func:`write_lm_eval_tasks` writes for task ``name`` (of any kind, whatever
    data path it names): a user's own YAML, or any other file, is not."""
    from curate import json_files

    try:
        text = json_files.read_bytes(path, 1 << 20).decode("utf-8")
    except (OSError, ValueError):  # missing, not a regular file, too large, not UTF-8
        return False
    for kind in YAML:
        head, tail = YAML[kind].format(name=json.dumps(name), data="\0").split("\0")
        middle = text[len(head):len(text) - len(tail)]
        if len(text) > len(head) + len(tail) and text.startswith(head) and text.endswith(tail) \
                and "\n" not in middle:
            try:
                if isinstance(json.loads(middle), str):
                    return True
            except ValueError:
                pass
    return False


def output_problem(specs: list[TaskSpec], out_dir: str | Path, force: bool = False) -> str | None:
    """A message when :func:`write_lm_eval_tasks` cannot or must not write into ``out_dir``, else None: ``out_dir``
    a file (or below one); a ``NAME.yaml`` or ``NAME.jsonl`` it would write a folder; and, unless ``force``, a
    ``NAME.yaml`` that is not the YAML it writes for that task (:func:`is_quarry_yaml`), or a ``NAME.jsonl``
    without that YAML beside it (the YAML is written first: it marks the data file as Quarry's). A rerun onto
    its own earlier output goes ahead."""
    import os

    from curate.write_guard import blocking_file

    out = Path(out_dir)
    above = blocking_file(out)
    if above:
        return (f"--write-lm-eval-tasks {out}: {above} is a file, not a folder" if str(above) != os.path.abspath(out)
                else f"--write-lm-eval-tasks {out} is a file, not a folder: give a folder to write the task files in")
    for spec in specs:
        yaml, data = out / f"{spec.name}.yaml", out / f"{spec.name}.jsonl"
        for path in (yaml, data):
            if path.is_dir():
                return f"{path} is a folder, where `pretrain eval --write-lm-eval-tasks` writes a file: move it"
        if force:
            continue
        ours = is_quarry_yaml(yaml, spec.name)
        for path in (yaml, data):
            if os.path.lexists(path) and not ours:
                return (f"{path} exists and is not a task file `pretrain eval --write-lm-eval-tasks` wrote: choose "
                        f"another folder, or pass --force to overwrite it")
    return None


def _write(path: Path, text: str) -> None:
    from curate.shards import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def write_lm_eval_tasks(specs: list[TaskSpec], out_dir: str | Path, keep: dict | None = None,
                        force: bool = False) -> list[Path]:
    """-> the YAML files written (one per task). ``keep``: {task name: the items to write}: the items a model
    scores (lm-eval stops on a continuation longer than the model's window, Quarry sets it aside; a task's limit
    counts the items scored); a task not in ``keep``: its valid items (with a limit, the first N).
    A ``NAME.yaml`` / ``NAME.jsonl`` already in ``out_dir`` that this function did not write is refused before
    anything is written, unless ``force`` (:func:`output_problem`)."""
    out = Path(out_dir)
    written = []
    for spec in specs:  # checked when tasks are parsed; again here, before anything is written, for any caller
        if not is_valid_task_name(spec.name):
            raise ValueError(f"task name {spec.name!r} is not allowed; a task name is {TASK_NAME_RULE}")
        if spec.kind not in YAML:
            raise ValueError(f"task {spec.name!r}: kind = {spec.kind!r}; choose one of {', '.join(YAML)}")
    problem = output_problem(specs, out, force)
    if problem:
        raise ValueError(problem)
    out.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        if spec.shots:
            raise ValueError(f"task {spec.name!r}: shots = {spec.shots}: lm-eval draws few-shot examples its own "
                             f"way; write 0-shot tasks (lm_eval --num_fewshot N for its own)")
        if spec.stride:
            raise ValueError(f"task {spec.name!r}: stride = {spec.stride}: lm-eval scores disjoint windows only")
        items = keep[spec.name] if keep is not None and spec.name in keep else read_items(spec).items
        if spec.kind == "cloze":
            rows = [dict(zip(("context", "target"), cloze_pair(it["text"]))) for it in items]
        else:
            rows = items
        data = out / f"{spec.name}.jsonl"
        yaml = out / f"{spec.name}.yaml"
        # the YAML first: it marks NAME.jsonl as this function's, so a rerun after a killed one goes on
        _write(yaml, _yaml_text(spec.kind, spec.name, str(data.resolve())))
        _write(data, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        written.append(yaml)
    return written

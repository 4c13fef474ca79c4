"""Evaluation: zero-shot (and few-shot) tasks with lm-evaluation-harness 0.4's definitions and metric names.

Start with ``tasks.py`` (what a task is; its file, checked item by item), then in the order the data flows:
``requests.py`` (items -> token sequences, as lm-eval tokenizes them; held by ``request_lists.py``), ``score.py`` (sequences -> log-likelihoods
with the model at any tp/pp/dp layout), ``metrics.py`` (log-likelihoods -> bits_per_byte, acc, acc_norm, ...),
``run.py`` (the whole pass, during training or from a checkpoint) and ``lm_eval_tasks.py`` (lm-eval YAMLs for the
same files). The command is ``pretrain eval`` (pretrain/commands/eval.py).
"""

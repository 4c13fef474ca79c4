"""`pretrain ablate`: is blend A a better training set than blend B? The same proxy model trained on each data
variant with the same tokens and several seeds, every run evaluated, and a verdict per metric that says whether
the difference is larger than the seed-to-seed noise. Modules: spec.py (the SPEC.toml), prepare.py (tokenizer and
token files), contamination.py (eval items in the training data), runs.py (one `pretrain train` per variant x
seed; ray_runs.py for Ray), stats.py (the verdict), report.py (table and curves), ablation.py (the loop)."""

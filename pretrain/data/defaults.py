"""Defaults of the data path that the command lines show in their --help: here, in a module that imports
nothing, so that `pretrain X --help` never loads numpy, sentencepiece or torch."""

DEFAULT_MAX_BYTES = 100_000_000  # tokenizer training: cap on the sampled text
DEFAULT_SEED = 1234  # Megatron-LM's --seed default
DEFAULT_MAX_EPOCHS = 4.0  # blends: warn when a dataset is repeated more than this many epochs
ORDERS = ("stable", "megatron")  # sample orders; see pretrain/data/stable_order.py

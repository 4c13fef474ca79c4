"""The data path of pretraining: sentencepiece tokenizer (``tokenizer``), curated shards to
``.bin/.idx`` (``tokenize``, ``indexed``), Megatron's GPT sample/shuffle indices (``gpt_dataset``) and
weighted blends (``blend_spec``, ``blend``). Nothing here imports torch.distributed."""

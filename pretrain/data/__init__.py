"""The data path of pretraining: sentencepiece tokenizer (``tokenizer``, its spread sample ``tokenizer_sample``),
curated shards to ``.bin/.idx`` (``tokenize``, ``indexed``) or to a dataset of parts on a local pool or a Ray
cluster (``tokenize_parts``, ``parts``, ``parts_gather``), manifests checked before they are read
(``manifest_check``), Megatron's GPT sample/shuffle indices (``gpt_dataset``, cached by ``index_cache``) and
weighted blends (``blend_spec``, ``blend``). Nothing here imports torch.distributed."""

"""Quarry pretraining: tokenizer, Megatron-compatible indexed datasets and blends, and a 3D-parallel GPT."""

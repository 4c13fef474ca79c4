"""Checkpoints through ``torch.distributed.checkpoint`` (DCP), loadable at any tp/pp/dp layout.

Layout of ``checkpoint.dir``::

    latest                       name of the newest complete checkpoint ("step_00000100"), replaced atomically
                                 by rank 0 only after every rank finished writing it
    step_00000100/
        dcp/                     DCP shards (.distcp) + .metadata: {"model": ..., "optim": ...} keyed by parameter
                                 name (see pretrain/model.py), DTensor-sharded, resharded on load
        model_config.json        the [model] table incl. padded_vocab_size: enough to rebuild the model
        meta.json                step, consumed_samples, lr scheduler state, layout, the run's whole config,
                                 tokenizer_sha256 (of data.tokenizer's .model; absent in older checkpoints)
        rng/rank_00000.json      per-rank python / numpy / torch (/ cuda) RNG states (JSON: nothing to unpickle)
        manifest.json            size and SHA-256 of every file above (manifest.py)

Optimizer state is saved flattened by parameter name (``state.<name>.exp_avg``...), so it reshards too. The
output head's copy of the tied embedding is saved under both names (``embed.weight`` and ``lm_head.weight``) so
that a pipeline's first and last stages both find it.

``load_model_for_inference(dir)`` rebuilds the whole model in one process (tp = pp = 1) from any checkpoint.

Safety: nothing read from a checkpoint runs code. DCP's pickled ``.metadata`` and its non-tensor entries go through
the restricted loaders of ``safe_load.py``; tensors through ``torch.load(weights_only=True)``; everything
else is JSON. Integrity: ``save`` refuses a model with non-finite weights (``latest`` never moves onto it) and
writes ``manifest.json`` before ``latest`` moves; ``find_resume`` verifies the checkpoint ``latest`` names and,
when it is damaged, names the damage and resumes from the newest intact older one (``checkpoint.on_damage =
"fallback"``, the default) or stops (``"stop"``). Loaded weights that are not finite are refused with a message.

``save(..., async_save=True)`` (``checkpoint.async_save``) writes in the background (``async_save.py``): the
manifest and ``latest`` follow only when every rank's files are complete; ``wait_async()`` waits for it.
``check_shared_storage(cfg)`` (``shared_storage.py``), at the start of a multi-process run, stops every rank at
once when one does not see rank 0's checkpoint.dir, log.dir, data.cache_dir or data files. An intact checkpoint
that does not fit the model the config builds is named as a config change (``config_change.py``).

The modules import one way: ``manifest`` (integrity) and ``safe_load`` (restricted unpickling) import nothing of
the package; ``find`` (picking a checkpoint) imports ``manifest``; ``save_load`` imports all three.
"""
from pretrain.checkpoint.find import (
    LATEST, CheckpointError, damage, find_intact, find_resume, resolve, step_dir,
)
from pretrain.checkpoint.async_save import wait as wait_async
from pretrain.checkpoint.shared_storage import SharedStorageError, check_shared_storage
from pretrain.checkpoint.save_load import (
    check_shapes, check_tokenizer, load, load_model_for_inference, model_state, nonfinite_names, optim_state,
    read_meta, read_model_config, resume_point, rng_state_json, save, saved_layer_count, set_rng_state_json,
)

"""`python -m pretrain ...`, and `torchrun --nproc-per-node N -m pretrain train --config C.toml`."""
import sys

from pretrain.cli import main

sys.exit(main())

"""The `pretrain` subcommands, one module each (``add_arguments(parser)``, ``run(args) -> int``). They parse
arguments and print; the work is in the library modules they call. Heavy libraries (torch, sentencepiece,
numba) are imported inside ``run``, so that ``pretrain --help`` and ``pretrain COMMAND --help`` start at once."""

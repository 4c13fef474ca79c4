"""`pretrain launch [--nnodes N --rdzv-endpoint HOST:PORT | --nnodes N --node-rank R --master-addr HOST]
--nproc-per-node P [--max-restarts R] --config C.toml [--set table.key=value ...]`: run `pretrain train` under
torchrun on this node and start it again when it fails (one such line per node; the work: pretrain/launch.py)."""
from __future__ import annotations

import re
import sys

HELP_EPILOG = """Every attempt is `python -m torch.distributed.run ... -m pretrain train --config C --set ...` with a
c10d rendezvous (or --standalone on one node); the trainers resume from the newest intact checkpoint in
checkpoint.dir, so a restarted job goes on with the losses of an uninterrupted one. A worker that dies: torchrun
restarts the workers of every node (each round's workers get a fresh store). The torchrun launcher itself
killed or failed: this command ends the workers it left and starts it again, up to --max-restarts times. The
static form (--node-rank, --master-addr, --master-port instead of --rdzv-endpoint): torchrun runs without
restarts of its own and every failure starts it again on every node. Not restarted: a job that stopped on
purpose (a bad config, storage that is not shared, a non-finite loss), an attempt whose launchers never met, and
a failure after which the other launchers did not rejoin within --timeout (a node lost for good: the message
names the checkpoint a rerun resumes from and this node's line). Waits are bounded by --timeout (default
parallel.timeout_s), and while no worker runs the command says every --notice seconds what it waits for.

examples:
  pretrain launch --nproc-per-node 4 --config pretrain/configs/tiny.toml --set parallel.tp=2 --set data.kind=synthetic --set model.vocab_size=256
  pretrain launch --nnodes 2 --nproc-per-node 8 --rdzv-endpoint head-node:29500 --rdzv-id run1 --max-restarts 3 --config pretrain/configs/tiny.toml --set parallel.tp=4 --set parallel.pp=2
  pretrain launch --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:29500 --dry-run --config pretrain/configs/tiny.toml
  pretrain launch --nnodes 2 --node-rank 1 --master-addr head-node --master-port 29500 --nproc-per-node 8 --config pretrain/configs/tiny.toml --set parallel.tp=8
"""


def add_arguments(parser) -> None:
    import argparse

    parser.epilog = HELP_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--nnodes", default="1", help="launchers (nodes) in the job (default 1)")
    parser.add_argument("--nproc-per-node", type=int, default=1, help="trainer processes on this node (default 1)")
    parser.add_argument("--rdzv-endpoint", help="HOST:PORT of the rendezvous, the same on every node (needed "
                        "with --nnodes > 1; one node without it: torchrun --standalone)")
    parser.add_argument("--rdzv-id", default="quarry", help="the job's rendezvous id, the same on every node "
                        "(default quarry)")
    parser.add_argument("--node-rank", type=int, help="the static form, instead of --rdzv-endpoint: this node's "
                        "number, 0 .. nnodes-1 (node 0 hosts the store at --master-addr:--master-port)")
    parser.add_argument("--master-addr", help="the static form: node 0's address, the same on every node")
    parser.add_argument("--master-port", type=int, default=29500, help="the static form: the store's port on "
                        "node 0 (default 29500)")
    parser.add_argument("--max-restarts", type=int, default=3, help="restarts of the workers (by torchrun) and "
                        "of torchrun itself (by this command) before giving up (default 3)")
    parser.add_argument("--timeout", type=float, help="seconds the launchers wait for each other (default: the "
                        "config's parallel.timeout_s, which also bounds every collective)")
    parser.add_argument("--notice", type=float, default=30.0, help="seconds between the messages that say what "
                        "an idle launcher waits for (default 30)")
    parser.add_argument("--dry-run", action="store_true", help="check the config, print the torchrun line, exit")
    parser.add_argument("--config", help="the training config (as for pretrain train)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="TABLE.KEY=VALUE",
                        help="override a config value, as for pretrain train")


def _check(args, plan) -> str | None:
    """A message when the arguments or the config cannot work, before anything is started."""
    from pretrain.config import ConfigError, check, load_config
    from pretrain.data.batches import check_data_paths

    if not args.nnodes.isdigit() or int(args.nnodes) < 1:
        return f"--nnodes {args.nnodes!r}: give the number of nodes (launchers), e.g. 2"
    if args.nproc_per_node < 1 or args.max_restarts < 0:
        return "--nproc-per-node must be at least 1 and --max-restarts at least 0"
    if not 0 < args.notice < float("inf"):  # -1 wrote its message at every poll, nan never
        return f"--notice {args.notice:g}: must be a finite number > 0 of seconds"
    if args.node_rank is not None or args.master_addr:
        if args.rdzv_endpoint:
            return ("give either --rdzv-endpoint (a rendezvous) or --node-rank and --master-addr (the static "
                    "form), not both")
        if args.node_rank is None or not args.master_addr:
            return "the static form needs both --node-rank (0 .. nnodes-1) and --master-addr (node 0's address)"
        if not 0 <= args.node_rank < plan.max_nodes:
            return f"--node-rank {args.node_rank}: must be 0 .. {plan.max_nodes - 1} with --nnodes {args.nnodes}"
        if not 0 < args.master_port < 65536:
            return f"--master-port {args.master_port}: must be 1 .. 65535"
    elif plan.max_nodes > 1 and not args.rdzv_endpoint:
        return (f"--nnodes {args.nnodes} needs --rdzv-endpoint HOST:PORT, the same on every node (HOST: the first "
                f"node, e.g. $(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) under Slurm), or "
                f"the static form: --node-rank and --master-addr")
    if args.rdzv_endpoint and (not re.fullmatch(r"[^\s:]+:\d{1,5}", args.rdzv_endpoint)
                               or not 0 < int(args.rdzv_endpoint.rsplit(":", 1)[1]) < 65536):
        return f"--rdzv-endpoint {args.rdzv_endpoint!r}: expected HOST:PORT, e.g. head-node:29500"
    try:
        cfg = load_config(args.config, args.overrides)
        check(cfg, plan.max_nodes * args.nproc_per_node)
        check_data_paths(cfg)
        from pretrain.train import check_tokenizer

        check_tokenizer(cfg, quiet=True)  # the ranks check it again (and print the note)
    except ConfigError as e:
        return str(e)
    plan.timeout_s = args.timeout if args.timeout is not None else cfg.parallel.timeout_s
    plan.checkpoint_dir = cfg.checkpoint.dir
    if not 0 < plan.timeout_s < float("inf"):  # nan fails too
        return f"--timeout {plan.timeout_s:g}: must be a finite number > 0 of seconds"
    return None


def _command_line() -> str:
    """This node's `pretrain launch ...` line as it was typed (for the message that says how to resume)."""
    import shlex

    argv = sys.argv[1:]
    return "pretrain " + shlex.join(argv) if argv[:1] == ["launch"] else ""


def run(args) -> int:
    import shlex

    from pretrain.launch import LaunchPlan, Supervisor, torchrun_command

    train_args = ([f"--config={args.config}"] if args.config else []) + [f"--set={o}" for o in args.overrides]
    plan = LaunchPlan(nnodes=args.nnodes, nproc_per_node=args.nproc_per_node, rdzv_endpoint=args.rdzv_endpoint,
                      rdzv_id=args.rdzv_id, node_rank=args.node_rank, master_addr=args.master_addr,
                      master_port=args.master_port, max_restarts=args.max_restarts, notice_s=args.notice,
                      train_args=train_args, command_line=_command_line())
    problem = _check(args, plan)
    if problem:
        print(f"pretrain launch: {problem}", file=sys.stderr)
        return 2
    if args.dry_run:
        print("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 " + shlex.join(torchrun_command(plan)))
        return 0
    return Supervisor(plan).run()

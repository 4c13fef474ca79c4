"""The one argparse dispatcher behind `curate` and `pretrain`: each subcommand is a module with
``add_arguments(parser)`` and ``run(args) -> int``.

Ctrl-C (SIGINT) ends any command with one line, not a traceback: ``PROG COMMAND: interrupted`` plus the
command module's ``INTERRUPT_HINT`` when it has one (what a rerun does), exit status 130. A command module with
``HANDLES_SIGTERM = True`` (``curate run``) also gets SIGTERM as the same unwinding (:class:`Terminated`, exit
status 143), so its ``finally`` blocks run (the process pool shut down, its workers ended, the lock released)
instead of the process vanishing and leaving its workers behind. Other commands keep SIGTERM's default (torchrun
ends a failed job's ranks with it; a rank blocked in a collective must die at once).

An error of the machine that no command handled itself (disk full, a read-only file system, permission denied:
``curate.os_errors``) ends the command with one line saying it, exit status 1, instead of a traceback.

Standard output or error closed by its reader (``curate run P.toml | head -1``, ``curate stats OUT | head -1``)
never ends or fails a command: what cannot be written is dropped quietly and the command goes on, its exit
status its own (0 when it succeeded; not 141 nor 1 for the closed pipe) (``curate.commands.streams``).
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import signal
import sys
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt (so code that cleans up after one
    cleans up after the other)."""


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during the clean-up ends the process at once
    raise Terminated()


def dispatch(prog: str, description: str, commands: dict, epilog: str, argv: list[str] | None = None) -> int:
    from curate.commands.streams import guarded_std_streams

    with guarded_std_streams() as guards:  # (around the parsing too: `--help | head -1`)
        code = _dispatch(prog, description, commands, epilog, argv)
        for guard in guards:
            said = guard.lost() if guard.name == "stdout" else None
            if said:
                print(f"{prog}: warning: {said}", file=sys.stderr, flush=True)
        if argv is None:  # the process's own command: its result is final, and a Ctrl-C in the interpreter's
            _install(signal.SIGINT, signal.SIG_IGN)  # teardown after "done" made a finished run exit 130
        return code


def _dispatch(prog: str, description: str, commands: dict, epilog: str, argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in commands.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    args = parser.parse_args(argv)
    if not faulthandler.is_enabled():  # a library crashing in this process (SIGSEGV) says where, in Python
        faulthandler.enable()
    module = importlib.import_module(args._module)
    threading.excepthook = _thread_error_hook(f"{prog} {args.command}")
    return run_interruptible(f"{prog} {args.command}", module, args)


def _thread_error_hook(name: str):
    """A library's background thread ending on an error of the machine (TensorBoard's writer on a full disk)
    says it in one line, as the command does; any other error gets Python's usual traceback."""
    default = threading.__excepthook__

    def hook(info):
        from curate.os_errors import machine_error

        said = machine_error(info.exc_value) if info.exc_value is not None else None
        if said is None:
            return default(info)
        print(f"{name}: error in a background thread: {said}", file=sys.stderr, flush=True)

    return hook


def run_interruptible(name: str, module, args) -> int:
    """``module.run(args)`` with Ctrl-C and SIGTERM ending it in one line (130 / 143)."""
    previous = _install(signal.SIGTERM, _on_sigterm) if getattr(module, "HANDLES_SIGTERM", False) else None
    try:
        return module.run(args) or 0
    except Exception as e:  # disk full, permissions, ...: one line, not a traceback (anything else is raised)
        from curate.os_errors import machine_error

        said = machine_error(e)
        if said is None:
            raise
        print(f"{name}: error: {said}; fix the cause and rerun the same command", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt as e:
        term = isinstance(e, Terminated)
        hint = getattr(module, "INTERRUPT_HINT", "")
        start = "\n" if sys.stderr.isatty() else ""  # (ends a progress bar's line on a terminal)
        print(f"{start}{name}: {'terminated (SIGTERM)' if term else 'interrupted'}" + (f"; {hint}" if hint else ""),
              file=sys.stderr, flush=True)
        return 143 if term else 130
    finally:
        if previous is not None:
            _install(signal.SIGTERM, previous)


def _install(signum, handler):
    """Set a handler (only the main thread can); returns the previous one, or None when not set."""
    try:
        return signal.signal(signum, handler)
    except ValueError:  # not the main thread (a test calling main() from a thread)
        return None

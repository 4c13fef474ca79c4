"""What a path is, told before it is opened: opening a named pipe blocks until a writer comes, reading
/dev/zero never ends, and a folder or a dangling link made "does not exist" messages that sent users looking for
a file that was there. One vocabulary for every message that names a kind of file (:func:`describe_kind`), and
one check of a path (:func:`file_problem`)."""
from __future__ import annotations

import os
import stat
import unicodedata

_FILE_TYPES = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))


def describe_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is: ``"a regular file"``, ``"a folder"``, ``"a character device"``,
    ``"a block device"``, ``"a named pipe"``, ``"a socket"`` (``"an unknown kind of file"`` otherwise)."""
    return next((name for test, name in _FILE_TYPES if test(mode)), "an unknown kind of file")


def file_problem(path, folder_ok: bool = False) -> str | None:
    """None for a regular file (or a link to one), and with ``folder_ok`` for a folder too; else what it is:
    ``"not found"``, ``"not found (a link to nothing)"``, ``"is not a regular file (a character device)"`` (``"is
    not a regular file or folder (...)"`` with ``folder_ok``), ... (never opened)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found" + (" (a link to nothing)" if os.path.islink(path) else "")
    except NotADirectoryError:
        return "not found (a folder in its path is a file)"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode)):
        return None
    wanted = "a regular file or folder" if folder_ok else "a regular file"
    return f"is not {wanted} ({describe_kind(mode)}{', through a link' if os.path.islink(path) else ''})"


def file_id(st: os.stat_result) -> tuple[int, int]:
    """Which file a ``stat`` result is of: ``(st_dev, st_ino)``, the same under every name of the file (a symbolic
    link, a hard link, another spelling of its path), so two paths whose ids are equal are one file, read once."""
    return st.st_dev, st.st_ino


def file_name_key(name: str) -> str:
    """What a name is as a file name on a case-insensitive file system that normalises Unicode (macOS, Windows):
    ``b`` and ``B``, or an NFC and an NFD spelling, are one file there (names that become files are compared so:
    blend datasets, ablation variants and tasks, eval tasks)."""
    return unicodedata.normalize("NFC", name).casefold()

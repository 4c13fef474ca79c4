"""Errors of the machine rather than of a command's input or of Quarry (disk full, a read-only or vanished
file system, permissions, too many open files), and paths that cannot be what a command asks of them (below a
file, a file where a folder goes): a command says them in one line, with what to do, instead of a traceback.
Libraries do not always set ``errno``: pyarrow says "[errno 28]" in its message, safetensors
"(os error 28)", and the number is read from there; numpy's ``tofile`` says only "8644 requested and 4064
written" (a short write: the disk filled), taken for ENOSPC."""
from __future__ import annotations

import errno
import os
import re

MACHINE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EMFILE, errno.ENFILE, errno.EACCES,
                  errno.EPERM}
# a path that cannot be a folder or file as asked (below a file, a file where a folder goes, a name too long, a
# loop of links): said in one line too when the error names the path (``filename``), whatever command met it
PATH_ERRNOS = {errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENAMETOOLONG, errno.ELOOP}
_IN_MESSAGE = re.compile(r"\[errno (\d+)\]|\(os error (\d+)\)", re.IGNORECASE)
_SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")


def errno_of(exc: BaseException) -> int | None:
    """The errno an exception carries, in its ``errno`` attribute or its message; None when it has none."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int):
        return code
    m = _IN_MESSAGE.search(str(exc))
    if m:
        return int(m.group(1) or m.group(2))
    return errno.ENOSPC if isinstance(exc, OSError) and _SHORT_WRITE.match(str(exc)) else None


def machine_error(exc: BaseException) -> str | None:
    """One line for an error of the machine (``MACHINE_ERRNOS``), or of a path it names (``PATH_ERRNOS``): its
    meaning and the file when known; None for any other exception."""
    code = errno_of(exc)
    where = getattr(exc, "filename", None)
    if code not in MACHINE_ERRNOS and not (code in PATH_ERRNOS and where):
        return None
    said = exc.strerror if isinstance(exc, OSError) and exc.errno == code and exc.strerror else os.strerror(code)
    return said + (f": {where}" if where else "")


def naming(exc: OSError, path) -> OSError:
    """``exc`` as an ``OSError`` that names ``path`` when it names no file itself (pyarrow's writers say
    "Error writing bytes to file ... [errno 28]" and nothing of which file); ``exc`` itself otherwise."""
    code = errno_of(exc)
    if getattr(exc, "filename", None) is not None or code is None:
        return exc
    return OSError(code, os.strerror(code), str(path))

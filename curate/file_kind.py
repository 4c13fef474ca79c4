"""What a path is, told before it is opened: opening a named pipe blocks until a writer comes, reading
/dev/zero never ends, and a folder or a dangling link made "does not exist" messages that sent users looking for
a file that was there."""
from __future__ import annotations

import os
import stat

_FILE_TYPES = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))


def file_problem(path) -> str | None:
    """None for a regular file (or a link to one); else what it is: ``"not found"``, ``"is not a regular file
    (a character device)"``, ... (never opened)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found" + (" (a link to nothing)" if os.path.islink(path) else "")
    except NotADirectoryError:
        return "not found (a folder in its path is a file)"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    what = next((name for test, name in _FILE_TYPES if test(mode)), "not a file")
    return f"is not a regular file ({what}{', through a link' if os.path.islink(path) else ''})"

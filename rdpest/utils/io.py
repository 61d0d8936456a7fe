"""Small file helpers shared by the audit store, results and benchmarks.

Files are created with the mode the process's umask gives (as ``open`` would), never the 0600 of
``tempfile.mkstemp``: a collaborator who can read the directory can read the results and resume
the audit.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["atomic_write_text", "refuse_symlink"]


def refuse_symlink(path: Path, what: str) -> None:
    """Raise ValueError if ``path`` is a symbolic link (writes through it would land elsewhere)."""
    if Path(path).is_symlink():
        raise ValueError(
            f"{what} {path} is a symbolic link; rdpest does not write through links: "
            "replace it with a regular file or use another directory"
        )


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see either the old or the whole new file.

    The text goes to a new file beside ``path`` (created with mode 0666 less the umask), is
    flushed to disk, and then replaces ``path`` in one rename.

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "note.txt"
    >>> atomic_write_text(target, "hello")
    >>> target.read_text()
    'hello'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

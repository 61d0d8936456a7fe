"""Small file and record helpers shared by the audit store, results and benchmarks.

Files are created with the mode the process's umask gives (as ``open`` would), never the 0600 of
``tempfile.mkstemp``: a collaborator who can read the directory can read the results and resume
the audit.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

import numpy as np

__all__ = ["array_digest", "atomic_write_text", "load_json", "qualified_name", "refuse_symlink"]


def array_digest(*arrays) -> str:
    """A short SHA-256 (16 hex digits) of arrays' dtypes, shapes and bytes, for fingerprints.

    Examples
    --------
    >>> array_digest(np.zeros(3)) == array_digest(np.zeros(3)) != array_digest(np.ones(3))
    True
    """
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()[:16]


def load_json(text: str | bytes):
    """``json.loads`` for files a user or a crash may have edited: an integer of more than 308
    digits is read as a float (±inf beyond the float range), so the callers' checks for finite
    numbers refuse it with their own ValueError instead of an OverflowError escaping from a
    later ``float()`` or ``math.isfinite``.

    Examples
    --------
    >>> load_json('{"a": 12, "b": 1' + '0' * 400 + '}')
    {'a': 12, 'b': inf}
    """
    return json.loads(text, parse_int=_int_or_float)


def _int_or_float(digits: str):
    return float(digits) if len(digits.lstrip("-")) > 308 else int(digits)


def qualified_name(obj) -> str:
    """``module.qualname`` of a function or class (of its type for other objects)."""
    name = getattr(obj, "__qualname__", type(obj).__qualname__)
    return f"{getattr(obj, '__module__', '?')}.{name}"


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

"""Small file and record helpers shared by the audit store, results and benchmarks.

Files are created with the mode the process's umask gives (as ``open`` would), never the 0600 of
``tempfile.mkstemp``: a collaborator who can read the directory can read the results and resume
the audit.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
from pathlib import Path

import numpy as np

__all__ = [
    "array_digest",
    "atomic_write_text",
    "dumps_strict",
    "load_json",
    "qualified_name",
    "refuse_symlink",
    "with_non_finite",
]

#: Non-finite numbers as a result file writes them: standard JSON has no Infinity or NaN, and
#: strict parsers (JavaScript's JSON.parse, many others) refuse Python's bare ``Infinity``.
_NON_FINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


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


def load_json(text: str | bytes, *, non_finite: bool = False, verbatim: tuple[str, ...] = ()):
    """``json.loads`` for files a user or a crash may have edited: an integer of more than 308
    digits is read as a float (±inf beyond the float range), so the callers' checks for finite
    numbers refuse it with their own ValueError instead of an OverflowError escaping from a
    later ``float()`` or ``math.isfinite``.

    Examples
    --------
    >>> load_json('{"a": 12, "b": 1' + '0' * 400 + '}')
    {'a': 12, 'b': inf}

    With ``non_finite``, the strings :func:`dumps_strict` writes for non-finite numbers are read
    as those numbers (:func:`with_non_finite`), except under the ``verbatim`` keys of a top-level
    object, which are read as written (a user's own text "NaN" in a configuration stays text).
    """
    value = json.loads(text, parse_int=_int_or_float)
    if not non_finite:
        return value
    if isinstance(value, dict):
        return {k: v if k in verbatim else with_non_finite(v) for k, v in value.items()}
    return with_non_finite(value)


def dumps_strict(value, **options) -> str:
    """``json.dumps`` that writes standard JSON: a non-finite number (a ceiling of ``inf``) is
    written as the string "Infinity", "-Infinity" or "NaN" (:func:`with_non_finite` reads them
    back), numpy values as numbers and lists.

    Examples
    --------
    >>> dumps_strict({"ceiling": float("inf"), "n": np.int64(3)})
    '{"ceiling": "Infinity", "n": 3}'
    >>> with_non_finite(json.loads(_))
    {'ceiling': inf, 'n': 3}
    """
    return json.dumps(_strict(value), allow_nan=False, **options)


def _strict(value):
    if isinstance(value, np.generic | np.ndarray):
        value = value.tolist() if isinstance(value, np.ndarray) else value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


def with_non_finite(value):
    """The numbers :func:`dumps_strict` wrote as strings, as floats again (in dicts and lists)."""
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {key: with_non_finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_non_finite(item) for item in value]
    return value


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

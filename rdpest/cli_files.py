"""Reading the samples that ``rdpest estimate`` and ``rdpest evaluate`` are given: .npy, .npz,
.csv and .txt files, each refused with a ValueError naming it when it cannot be a sample."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

__all__ = ["load_samples"]


def _header_lines(first: str, delimiter: str | None) -> int:
    """1 when the first line of a text file is a header (some field is not a number), else 0."""
    fields = [f.strip() for f in first.strip().split(delimiter)]
    try:
        [float(f) for f in fields]
    except ValueError:
        return 1
    return 0


def _numbers_split_by_another(first: str, delimiter: str | None) -> str | None:
    """How a first line taken for a header is numbers after all, in another layout than the
    file kind's (``delimiter``): split at another separator (a comma-separated .txt, a
    ;-separated .csv), or written with decimal commas ("1,5;2,5", or "0,5 1,5" in a .txt). None
    if it is not (a header)."""
    names = {",": "commas", ";": "semicolons", None: "spaces or tabs"}
    for other, name in names.items():
        fields = [f.strip() for f in first.strip().split(other)]
        if other == delimiter:
            # The file's own separator: only its fields' decimal commas can make them numbers
            # (a .csv's commas cannot be decimal ones).
            variants, needed = ((True,) if other != "," else ()), 1
        else:
            variants, needed = (False, True), 2
        if len(fields) < needed:
            continue
        for decimal_comma in variants:
            try:
                [float(f.replace(",", ".") if decimal_comma else f) for f in fields]
            except ValueError:
                continue
            return name + (" with decimal commas" if decimal_comma else "")
    return None


def _warn_of_pandas_layouts(path: str, first: str, skip: int, delimiter, data) -> None:
    """Warn of the two shapes pandas' ``to_csv`` gives a column of scores that this reader
    takes at their word: an unnamed Series's header ``0`` (a number, so read as a first score
    of 0) and the index as a first column (0, 1, 2, ... under an empty header field)."""
    first = first.strip()
    if not skip and first == "0" and data.ndim == 1 and data.size > 1:
        warnings.warn(
            f"{path}: its first line, 0, is read as a score of 0; pandas writes 0 as the header "
            "of an unnamed Series (to_csv): if it is a header, remove it or name the column",
            UserWarning,
            stacklevel=3,
        )
    header = [f.strip() for f in first.split(delimiter)]
    if skip and header[0] == "" and data.ndim == 2 and data.shape[0] > 1:
        if np.array_equal(data[:, 0], np.arange(data.shape[0])):
            warnings.warn(
                f"{path}: its first column, under an empty header, counts 0, 1, 2, ...: a pandas "
                "index (to_csv without index=False)? It is read as a feature of the samples",
                UserWarning,
                stacklevel=3,
            )


def _is_npy(file: Path) -> bool:
    """Whether the file starts with the .npy format's magic string."""
    with open(file, "rb") as handle:
        return handle.read(6) == b"\x93NUMPY"


def _check_npz(file: Path) -> None:
    """A ValueError unless the file starts as a zip archive, as .npz files do: a .npy file
    named .npz met numpy's array without a context manager (a TypeError), and other bytes
    numpy's advice to load pickles (CLI review)."""
    if _is_npy(file):
        raise ValueError("it is a NumPy .npy file, not an .npz archive: name it .npy")
    with open(file, "rb") as handle:
        start = handle.read(4)
    if start not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise ValueError("it is not an .npz archive (a zip file of .npy arrays)")


def _warn_of_decimal_commas(path: str, lines: list[str], skip: int, data) -> None:
    """Warn where every row of a .csv is two whole numbers, the second all digits and one of
    them with a leading zero (or a first field of -0), as one column written with decimal
    commas reads (1,125730 for 1.125730; -0,5 lost its sign): it is read as two columns, and
    gave an estimate without a word (CLI review)."""
    rows = [line.strip() for line in lines[skip:] if line.strip()]
    if not (data.ndim == 2 and data.shape[1] == 2 and all(_DECIMAL_COMMA.match(r) for r in rows)):
        return
    # whole-number pairs (counts: "1,2") are samples too; a fraction's digits show themselves
    # by a leading zero ("1,05"), a whole number by none, and "-0" is no integer anyone writes
    # (zero-padded whole numbers, "07,34", pad the first field too: no warning for them)
    parts = [row.split(",") for row in rows]
    if any(len(a.lstrip("+-")) > 1 and a.lstrip("+-")[0] == "0" for a, _ in parts):
        return
    if any(len(b) > 1 and b[0] == "0" for _, b in parts) or any(
        a in ("-0", "+0") for a, _ in parts
    ):
        warnings.warn(
            f"{path}: every row is two whole numbers separated by a comma ({rows[0]}): one "
            "column written with decimal commas? It is read as two columns; if so, write "
            "decimal points",
            UserWarning,
            stacklevel=3,
        )


_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")


def load_samples(path: str) -> np.ndarray:
    """Read a sample from .npy, .npz (first array), .csv or .txt (whitespace separated).

    A .csv or .txt file whose first line is not numbers (a header such as ``loss``) is read
    without that line; only the first line is ever skipped. The result is a float64 array of
    shape (n,) or (n, d) of finite numbers; anything else (an empty or 0-d file, a boolean,
    structured or complex array, NaN or inf, a directory) is a ValueError naming the file.
    """
    if not str(path):  # Path("") is the current directory
        raise ValueError("an empty path was given for a file of samples")
    file = Path(path)
    if file.is_dir():
        raise ValueError(f"{path} is a directory, not a file of samples")
    if file.exists() and not file.is_file():  # a pipe, a device, a socket
        raise ValueError(f"{path} is not a regular file (a pipe or a device?)")
    if not file.is_file():
        raise ValueError(f"no such file: {path}")
    suffix = file.suffix.lower()
    if suffix not in (".npy", ".npz", ".csv", ".txt"):
        raise ValueError(f"unsupported format {suffix!r} for {path}: use .npy, .npz, .csv, .txt")
    try:
        if suffix == ".npy":
            if not _is_npy(file):  # numpy would suggest allow_pickle=True: never for samples
                raise ValueError("it is not a NumPy .npy file (its magic string is missing)")
            data = np.load(file, allow_pickle=False)
        elif suffix == ".npz":
            _check_npz(file)
            with np.load(file, allow_pickle=False) as archive:
                if not archive.files:
                    raise ValueError("it holds no arrays")
                data = archive[archive.files[0]]
        else:
            delimiter = "," if suffix == ".csv" else None
            # -sig: a spreadsheet's byte-order mark. Read once, and parsed from these lines
            # (split at "\n", as a file's lines are read: newlines are already translated).
            lines = file.read_text(encoding="utf-8-sig").split("\n")
            # A # comment is no part of the line (np.loadtxt drops it): "1 # run 0" is a first
            # score, which was taken for a header and dropped without a word (diff review)
            first = _without_comment(lines[0])
            skip = _header_lines(first, delimiter)
            other = _numbers_split_by_another(first, delimiter) if skip else None
            if other is not None:
                expected = "commas" if delimiter == "," else "spaces or tabs"
                if other == "commas":  # in a .txt: separators, or decimal commas of one column?
                    advice = (
                        "if the commas separate numbers, name the file .csv; if they are "
                        "decimal commas, write decimal points"
                    )
                else:
                    advice = "write it that way"
                raise ValueError(
                    f"its first line holds numbers separated by {other}, but a {suffix} file is "
                    f"read as numbers (with decimal points) separated by {expected}: {advice}"
                )
            rows = _data_lines(lines, skip)
            if not rows:
                raise ValueError(
                    "it holds a header line and no numbers"
                    if skip and first.strip()
                    else "it holds no numbers (it is empty, or blank and # comment lines only)"
                )
            try:
                data = np.loadtxt(lines, delimiter=delimiter, ndmin=1, skiprows=skip)
            except ValueError as exc:
                raise ValueError(_unreadable_line(rows, delimiter) or str(exc)) from None
            _warn_of_pandas_layouts(path, first, skip, delimiter, np.asarray(data))
            if delimiter == ",":
                _warn_of_decimal_commas(path, lines, skip, np.asarray(data))
    except (OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc or type(exc).__name__}") from None
    data = np.asarray(data)
    # Booleans are refused as rdpest.auditing.evaluate refuses them: a 0/1 decision saved where
    # a score was meant is a mistake more often than a sample.
    if data.dtype.names is not None or data.dtype.kind not in "iuf":
        raise ValueError(
            f"{path} holds a {data.dtype} array; samples must be real numbers (integer or float)"
        )
    if data.ndim not in (1, 2) or data.shape[0] == 0:
        raise ValueError(
            f"{path} must hold a non-empty array of shape (n,) or (n, d), got shape {data.shape}"
        )
    data = data.astype(np.float64)
    bad = ~np.isfinite(data)
    if bad.any():
        first = np.argwhere(bad)[0]
        where = f"at index {int(first[0])}"
        if suffix in (".csv", ".txt"):  # the line, counted from 1 as editors count; one row
            # of several values reads as 1-D
            where = f"on line {rows[0 if len(rows) == 1 else first[0]][0]}"
        raise ValueError(
            f"{path} holds {int(bad.sum())} non-finite value(s) (NaN or inf), the first "
            f"{where}: {data[tuple(first)]}"
        )
    return data


def _without_comment(line: str) -> str:
    """A line as np.loadtxt reads it: without its # comment."""
    return line.split("#")[0]


def _data_lines(lines: list[str], skip: int) -> list[tuple[int, str]]:
    """The lines np.loadtxt reads as rows, with their numbers in the file counted from 1: those
    after the header that hold something besides a # comment."""
    texts = ((n, _without_comment(line).strip()) for n, line in enumerate(lines[skip:], skip + 1))
    return [(n, text) for n, text in texts if text]


def _unreadable_line(rows: list[tuple[int, str]], delimiter: str | None) -> str | None:
    """Name the first row that is not numbers, or whose count of values differs from the first
    row's, by its line in the file (np.loadtxt counts its rows from 0 in one message and from 1
    in another, and leaves out the header). None where every row reads."""
    width = None
    for number, text in rows:
        fields = text.split(delimiter)
        try:
            [float(field) for field in fields]
            if any("_" in field for field in fields):  # float("1_000") reads; numpy does not
                raise ValueError
        except ValueError:
            return f"line {number} is not numbers: {text!r}"
        if width is not None and len(fields) != width:
            return f"line {number} holds {len(fields)} values where the lines above hold {width}"
        width = len(fields)
    return None

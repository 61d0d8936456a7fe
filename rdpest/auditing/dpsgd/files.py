"""Readers of data sets in the formats they are distributed in: MNIST's IDX files and CIFAR-10's
binary version (each file possibly gzipped). Nothing here downloads, and nothing is unpickled.

:mod:`rdpest.auditing.dpsgd.data` reads them from a ``"KIND:PATH"`` string and re-exports
:func:`load_mnist` and :func:`load_cifar10`.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

__all__ = ["load_cifar10", "load_mnist"]

_SPLITS = ("train", "test", "all")
# MNIST's files (LeCun et al., "The MNIST database"), each maybe gzipped as distributed.
_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_IDX_UNSIGNED_BYTE = 0x08
# A gzipped file is decompressed to at most this many bytes (4 GiB, far beyond MNIST's 47 MB and
# CIFAR-10's 30 MB per batch), whatever its header announces.
_MAX_BYTES = 1 << 32
_HEAD = 4 + 4 * 255  # the longest IDX header: a magic number and up to 255 dimensions
# CIFAR-10's binary version (Krizhevsky 2009): records of 1 label byte and 3 planes of 32×32.
_CIFAR_BIN = "cifar-10-batches-bin"
_CIFAR_FILES = {
    "train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
    "test": ("test_batch.bin",),
}
_CIFAR_SHAPE = (3, 32, 32)
_CIFAR_RECORD = 1 + math.prod(_CIFAR_SHAPE)
# A batch holds 10 000 records; a file (or what a .gz inflates to) beyond a few times that is not
# one, and is refused before it is read (a small .gz could otherwise inflate to gigabytes).
_CIFAR_MAX_RECORDS = 40_000
_CIFAR_MAX_BYTES = _CIFAR_MAX_RECORDS * _CIFAR_RECORD


def _checked_images(X: np.ndarray, labels: np.ndarray, where: str):
    """Images and labels read from files, refused here, naming where they came from, if the
    images are empty (a 0x0 IDX header) or the labels hold one class (what load_arrays refuses,
    without its copy of the images: the bytes read are finite and the labels in 0-9)."""
    if X[0].size == 0:
        raise ValueError(f"{where}: the images are empty (shape {X.shape[1:]})")
    classes = np.unique(labels).size
    if classes < 2:
        raise ValueError(f"{where}: the labels hold {classes} class; an audit needs at least 2")
    return X, labels.astype(np.int64)


def _check_split(split) -> tuple[str, ...]:
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {list(_SPLITS)}, got {split!r}")
    return ("train", "test") if split == "all" else (split,)


def _directory(path, what: str, expected: str) -> Path:
    """``path`` as an existing directory, or a ValueError saying what to pass instead."""
    folder = Path(os.path.expanduser(os.fspath(path)))
    if folder.is_file():
        raise ValueError(
            f"{what} path {str(folder)!r} is a file; pass the directory holding {expected}"
        )
    if not folder.is_dir():
        raise ValueError(f"{what} directory {str(folder)!r} does not exist")
    return folder


def _read_file(path: Path, expected_size=None) -> bytes | bytearray:
    """The bytes of ``path``, decompressed when its name ends in ``.gz``.

    ``expected_size(head)`` (for a gzipped file) gives the file's length from its first
    ``_HEAD`` bytes (default: :data:`_MAX_BYTES`); reading stops one byte past it, so a corrupt
    or hostile archive inflates no further than that before the length check refuses it."""
    try:
        if path.suffix != ".gz":
            return path.read_bytes()
        with gzip.open(path, "rb") as handle:
            data = bytearray(handle.read(_HEAD))  # grown in place: no second copy at the end
            size = _MAX_BYTES if expected_size is None else expected_size(bytes(data))
            left = size + 1 - len(data)
            while left > 0 and (chunk := handle.read(min(left, 1 << 20))):
                data += chunk
                left -= len(chunk)
            return data
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"cannot read {str(path)!r}: {exc}") from None


def _idx_size(head: bytes) -> int:
    """An IDX file's length from its header (what follows the header: one byte per entry), at
    most :data:`_MAX_BYTES`; the header's own length where it is not an IDX header of unsigned
    bytes (the parse then says what is wrong)."""
    if len(head) < 4 or head[:3] != bytes([0, 0, _IDX_UNSIGNED_BYTE]):
        return len(head)
    ndim = head[3]
    header = 4 + 4 * ndim
    if len(head) < header:
        return len(head)
    return header + min(math.prod(_idx_shape(head, ndim)), _MAX_BYTES)


def _idx_shape(data: bytes, ndim: int) -> tuple[int, ...]:
    """The sizes an IDX header announces: ``ndim`` big-endian uint32 after the magic number."""
    return tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))


def _parse_idx(data: bytes, path: Path, ndim: int) -> np.ndarray:
    """An IDX array of unsigned bytes (LeCun et al.'s format of the MNIST files), checked.

    The header is a magic number (two zero bytes, the type code 0x08 for unsigned bytes and the
    number of dimensions), then each dimension's size as a big-endian uint32; the data follow.
    """
    name = str(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        gzipped = " (gzipped data: name the file .gz)" if data[:2] == b"\x1f\x8b" else ""
        raise ValueError(
            f"{name!r} is not an IDX file: its magic number must start with two zero bytes, "
            f"got {data[:4].hex() or 'an empty file'}{gzipped}"
        )
    if data[2] != _IDX_UNSIGNED_BYTE:
        raise ValueError(
            f"{name!r}: IDX type code 0x{data[2]:02x}, expected 0x08 (unsigned bytes, as in MNIST)"
        )
    if data[3] != ndim:
        expected = "images (n, rows, cols)" if ndim == 3 else "labels (n,)"
        raise ValueError(
            f"{name!r}: holds a {data[3]}-dimensional IDX array, expected {ndim} for {expected}"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{name!r}: the file ends inside its IDX header ({len(data)} bytes)")
    shape = _idx_shape(data, ndim)
    size = math.prod(shape)
    if len(data) != header + size:
        # a gzipped file is read only to one byte past the announced size (_read_file)
        found = f"{len(data) - header}" if len(data) < header + size else "more"
        raise ValueError(
            f"{name!r}: its header announces an array of shape {shape} ({size} bytes) but "
            f"{found} bytes follow (truncated or corrupt file?)"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _mnist_file(where: Path, name: str) -> Path | None:
    """``name`` or ``name.gz`` (or their dotted re-packaging) in ``where``, or None."""
    dotted = name.replace("-idx", ".idx")  # a common re-packaging: train-images.idx3-ubyte
    for candidate in (name, f"{name}.gz", dotted, f"{dotted}.gz"):
        if (where / candidate).is_file():
            return where / candidate
    return None


def _mnist_files(folder: Path, parts) -> dict[str, tuple[Path, Path]]:
    """Each part's (images, labels) files, all from ONE place: ``folder``, or where torchvision
    puts them below it (``MNIST/raw``, ``FashionMNIST/raw`` or, for ``folder`` = ``.../MNIST``,
    ``raw``): the first of these places holding any of the split's files must hold them all (an
    incomplete ``MNIST/raw`` is refused, not passed over for ``FashionMNIST/raw``). Looking each
    file up on its own paired one data set's images with another's labels of the same count."""
    names = [name for part in parts for name in _MNIST_FILES[part]]
    places = (folder, *(folder / d / "raw" for d in ("MNIST", "FashionMNIST")), folder / "raw")
    for where in places:
        found = {name: _mnist_file(where, name) for name in names}
        if all(found.values()):
            return {part: tuple(found[n] for n in _MNIST_FILES[part]) for part in parts}
        if any(found.values()):
            missing = [n for n, f in found.items() if f is None]
            raise ValueError(
                f"{str(where)!r} holds only part of MNIST's files: no {', '.join(missing)} (or "
                ".gz) there. A split's images and labels are read from one folder, never paired "
                "across folders; complete that folder or pass one holding all of the split's files"
            )
    raise ValueError(
        f"no MNIST file {names[0]} (or {names[0]}.gz) in {str(folder)!r}; expected the files as "
        "distributed: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte "
        "and t10k-labels-idx1-ubyte, each possibly gzipped"
    )


def load_mnist(path: str | os.PathLike, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Read MNIST from its IDX files as distributed (never downloads).

    Parameters
    ----------
    path : str or path-like
        A directory holding ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
        ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each possibly gzipped
        (``.gz``), or holding them under ``MNIST/raw`` (torchvision's layout). Fashion-MNIST's
        files have the same names and format.
    split : {"train", "test", "all"}, default "train"
        The 60 000 training images, the 10 000 test (``t10k``) images, or both, training first.
        Only the files of the split are needed.

    Returns
    -------
    X : numpy.ndarray of shape (n, 1, rows, cols), float32
        Pixel intensities divided by 255, in [0, 1] (28×28 for MNIST).
    y : numpy.ndarray of shape (n,), int64
        The labels, 0–9 for MNIST.

    Raises
    ------
    ValueError
        If a file is missing or not readable (all of a split's files are read from the first
        of those folders that holds any of them), if its IDX header has a wrong magic number, type
        code or number of dimensions, if its length does not match the sizes in its header, if
        the image and label files hold different numbers of examples, or if a label lies outside
        0–9.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> def idx(*shape):  # an IDX header of unsigned bytes
    ...     return bytes([0, 0, 8, len(shape)]) + np.array(shape, dtype=">u4").tobytes()
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "train-images-idx3-ubyte").write_bytes(idx(2, 28, 28) + bytes(2 * 784))
    >>> _ = (folder / "train-labels-idx1-ubyte").write_bytes(idx(2) + bytes([3, 7]))
    >>> X, y = load_mnist(folder)
    >>> X.shape, X.dtype, y.tolist()
    ((2, 1, 28, 28), dtype('float32'), [3, 7])
    """
    folder = _directory(path, "MNIST", "MNIST's IDX files")
    images, labels = [], []
    parts = _check_split(split)
    files = _mnist_files(folder, parts)
    for part in parts:
        image_file, label_file = files[part]
        part_images = _parse_idx(_read_file(image_file, _idx_size), image_file, 3)
        part_labels = _parse_idx(_read_file(label_file, _idx_size), label_file, 1)
        if len(part_images) != len(part_labels):
            raise ValueError(
                f"{str(image_file)!r} holds {len(part_images)} images but {str(label_file)!r} "
                f"holds {len(part_labels)} labels"
            )
        if len(part_labels) == 0:
            raise ValueError(f"{str(image_file)!r} holds no images")
        bad = np.flatnonzero(part_labels > 9)
        if bad.size:
            raise ValueError(
                f"{str(label_file)!r}: example {int(bad[0])} has label {int(part_labels[bad[0]])}, "
                "outside MNIST's 0-9 (not an MNIST label file?)"
            )
        images.append(part_images)
        labels.append(part_labels)
    if len({im.shape[1:] for im in images}) > 1:
        raise ValueError(
            f"the training and test images of {str(folder)!r} differ in size: "
            f"{[im.shape[1:] for im in images]}"
        )
    X = np.concatenate(images)[:, None].astype(np.float32)
    X /= np.float32(255.0)
    return _checked_images(X, np.concatenate(labels), f"MNIST in {str(folder)!r}")


def _cifar_folder(path) -> Path:
    """The ``cifar-10-batches-bin`` directory at or below ``path``; refuses the pickled version."""
    raw = Path(os.path.expanduser(os.fspath(path)))
    pickled = raw.name == "cifar-10-batches-py" or raw.name.startswith("cifar-10-python")
    if raw.is_dir() and not (raw / _CIFAR_BIN).is_dir():
        pickled = pickled or (raw / "cifar-10-batches-py").is_dir()
        pickled = pickled or (
            (raw / "data_batch_1").is_file() and not (raw / "data_batch_1.bin").is_file()
        )
    if pickled:
        raise ValueError(
            f"{str(raw)!r} is CIFAR-10's Python version, whose batches are pickles: rdpest never "
            "unpickles files (unpickling can run arbitrary code). Use CIFAR-10's binary version "
            "instead (cifar-10-binary.tar.gz, which extracts to cifar-10-batches-bin/ with "
            "data_batch_1.bin ... data_batch_5.bin and test_batch.bin)"
        )
    if raw.is_file() and raw.name.endswith((".tar.gz", ".tgz", ".tar")):
        raise ValueError(
            f"{str(raw)!r} is an archive; extract it (tar -xzf) and pass the directory "
            f"{_CIFAR_BIN} it creates"
        )
    folder = _directory(raw, "CIFAR-10", f"{_CIFAR_BIN}'s .bin files")
    return folder / _CIFAR_BIN if (folder / _CIFAR_BIN).is_dir() else folder


def load_cifar10(path: str | os.PathLike, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Read CIFAR-10's binary version (never downloads, never unpickles).

    Parameters
    ----------
    path : str or path-like
        The directory ``cifar-10-batches-bin`` (extracted from ``cifar-10-binary.tar.gz``) holding
        ``data_batch_1.bin`` … ``data_batch_5.bin`` and ``test_batch.bin`` (each possibly
        gzipped, ``.bin.gz``), or the directory above it. Each file is a sequence of 3073-byte
        records: the label byte (0–9), then the 1024 red, 1024 green and 1024 blue pixel bytes
        of a 32×32 image, row by row. The Python version (``cifar-10-batches-py``, pickled
        batches) is refused.
    split : {"train", "test", "all"}, default "train"
        The five training batches (50 000 images), the test batch (10 000), or both, training
        first. Only the files of the split are needed.

    Returns
    -------
    X : numpy.ndarray of shape (n, 3, 32, 32), float32
        Pixel intensities divided by 255, in [0, 1], channels first (R, G, B).
    y : numpy.ndarray of shape (n,), int64
        The labels 0–9.

    Raises
    ------
    ValueError
        If ``path`` is the Python (pickle) version or an archive, if a batch file is missing,
        empty, larger than 40 000 records or not a whole number of records, if a label lies
        outside 0–9, or if the labels hold a single class.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "cifar-10-batches-bin"
    >>> folder.mkdir()
    >>> for i in range(1, 6):  # one image per batch, labelled i
    ...     _ = (folder / f"data_batch_{i}.bin").write_bytes(bytes([i]) + bytes([255] * 3072))
    >>> X, y = load_cifar10(folder.parent)
    >>> X.shape, X.dtype, float(X.max()), y.tolist()
    ((5, 3, 32, 32), dtype('float32'), 1.0, [1, 2, 3, 4, 5])
    """
    folder = _cifar_folder(path)
    records = []
    for part in _check_split(split):
        for name in _CIFAR_FILES[part]:
            file = folder / name
            if not file.is_file() and (folder / f"{name}.gz").is_file():
                file = folder / f"{name}.gz"  # gzipped batches are read as MNIST's files are
            if file.is_dir():
                raise ValueError(f"{str(file)!r} is a directory, not a CIFAR-10 batch file")
            if not file.is_file():
                raise ValueError(
                    f"no CIFAR-10 batch {name} (or {name}.gz) in {str(folder)!r}; the binary "
                    f"version holds {', '.join(_CIFAR_FILES['train'] + _CIFAR_FILES['test'])}"
                )
            too_large = file.suffix != ".gz" and file.stat().st_size > _CIFAR_MAX_BYTES
            data = b"" if too_large else _read_file(file, lambda head: _CIFAR_MAX_BYTES)
            if too_large or len(data) > _CIFAR_MAX_BYTES:
                raise ValueError(
                    f"{str(file)!r} holds more than {_CIFAR_MAX_RECORDS} CIFAR-10 records "
                    f"({_CIFAR_MAX_BYTES} bytes); a batch of the binary version holds 10000"
                )
            if len(data) == 0 or len(data) % _CIFAR_RECORD:
                raise ValueError(
                    f"{str(file)!r} holds {len(data)} bytes, not a whole number of "
                    f"{_CIFAR_RECORD}-byte CIFAR-10 records (truncated, or not the binary version?)"
                )
            batch = np.frombuffer(data, dtype=np.uint8).reshape(-1, _CIFAR_RECORD)
            bad = np.flatnonzero(batch[:, 0] > 9)
            if bad.size:
                raise ValueError(
                    f"{str(file)!r}: record {int(bad[0])} has label {int(batch[bad[0], 0])}, "
                    "outside CIFAR-10's 0-9 (not the CIFAR-10 binary version?)"
                )
            records.append(batch)
    table = np.concatenate(records)
    X = table[:, 1:].reshape(-1, *_CIFAR_SHAPE).astype(np.float32)
    X /= np.float32(255.0)
    return _checked_images(X, table[:, 0], f"CIFAR-10 in {str(folder)!r}")

"""Data for DP-SGD audits: the embedded default data set and loaders for a user's own arrays.

The default data is scikit-learn's copy of the UCI optical digits (``sklearn.datasets.load_digits``:
1797 grey-scale 8×8 images of the digits 0–9, 16 intensity levels), which ships inside
scikit-learn, so an audit runs with no download. Users audit their own data (MNIST, CIFAR-10, …)
by passing arrays (:func:`load_arrays`) or files they already have: a ``.npz`` archive
(:func:`load_npz`), MNIST's IDX files as distributed (:func:`load_mnist`) or CIFAR-10's binary
version (:func:`load_cifar10`). :func:`load_data` reads any of them from one ``"KIND:PATH"``
string (what ``rdpest audit --data`` takes). Nothing here ever downloads, and nothing is ever
unpickled (unpickling a file can run arbitrary code).

The audit set-up follows Kim, Varshney & Alabi (2026, Sec. 4) and Nasr et al. 2023,
"Tight Auditing of Differentially Private Machine Learning": half of the data pretrains the
worst-case initial parameters θ₀ non-privately, the disjoint other half is the audited training
set (:func:`split_pretrain`).
"""

from __future__ import annotations

import gzip
import math
import numbers
import os
import zipfile
from pathlib import Path

import numpy as np

__all__ = [
    "DATA_KINDS",
    "load_arrays",
    "load_cifar10",
    "load_data",
    "load_digits_data",
    "load_mnist",
    "load_npz",
    "parse_data_spec",
    "split_pretrain",
]

_NPZ_KEYS = (("X", "y"), ("x_train", "y_train"))
#: The kinds of data :func:`load_data` reads, as the ``KIND`` of a ``"KIND:PATH"`` string.
DATA_KINDS = ("digits", "mnist", "cifar10", "npz")
_SPLITS = ("train", "test", "all")
# MNIST's files (LeCun et al., "The MNIST database"), each maybe gzipped as distributed.
_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_IDX_UNSIGNED_BYTE = 0x08
# CIFAR-10's binary version (Krizhevsky 2009): records of 1 label byte and 3 planes of 32×32.
_CIFAR_BIN = "cifar-10-batches-bin"
_CIFAR_FILES = {
    "train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
    "test": ("test_batch.bin",),
}
_CIFAR_SHAPE = (3, 32, 32)
_CIFAR_RECORD = 1 + math.prod(_CIFAR_SHAPE)


def load_digits_data() -> tuple[np.ndarray, np.ndarray]:
    """Return scikit-learn's digits as float32 features in [0, 1] and int64 labels.

    Returns
    -------
    X : numpy.ndarray of shape (1797, 64), float32
        Pixel intensities divided by 16 (the data's maximum), row-major 8×8 images.
    y : numpy.ndarray of shape (1797,), int64
        Digit labels 0–9.

    Examples
    --------
    >>> X, y = load_digits_data()
    >>> X.shape, X.dtype, float(X.min()), float(X.max()), y.dtype, sorted(set(y.tolist()))[:3]
    ((1797, 64), dtype('float32'), 0.0, 1.0, dtype('int64'), [0, 1, 2])
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    X = (np.asarray(bunch.data, dtype=np.float64) / 16.0).astype(np.float32)
    y = np.asarray(bunch.target, dtype=np.int64)
    return X, y


def load_arrays(X, y) -> tuple[np.ndarray, np.ndarray]:
    """Validate a user's features and labels and return them as float32 / int64 arrays.

    Parameters
    ----------
    X : array-like of shape (n, d) or (n, ...) for images
        Real-valued, finite features; one row (or image) per example.
    y : array-like of shape (n,)
        Integer class labels (integral floats such as ``3.0`` are accepted), at least two
        distinct classes, all ≥ 0.

    Returns
    -------
    X : numpy.ndarray, float32, same shape as the input
    y : numpy.ndarray of shape (n,), int64

    Raises
    ------
    ValueError
        If X is not at least 2-D, not numeric or not finite, if y is not 1-D integer labels
        with at least two classes, or if the lengths differ.

    Examples
    --------
    >>> X, y = load_arrays([[0.0, 1.0], [1.0, 0.0]], [0, 1])
    >>> X.dtype, y.dtype, X.shape
    (dtype('float32'), dtype('int64'), (2, 2))
    >>> load_arrays([[0.0], [1.0]], [0, 0])
    Traceback (most recent call last):
    ...
    ValueError: y must contain at least 2 classes, got 1
    """
    try:
        X_arr = np.asarray(X)
        y_arr = np.asarray(y)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X and y must be numeric arrays (ragged input?): {exc}") from None
    if X_arr.dtype == object or not (np.issubdtype(X_arr.dtype, np.number) or X_arr.dtype == bool):
        raise ValueError(f"X must be a numeric array, got dtype {X_arr.dtype}")
    if np.iscomplexobj(X_arr):
        raise ValueError("X must be real-valued, got a complex array")
    if X_arr.ndim < 2:
        raise ValueError(
            f"X must have one row (or image) per example, i.e. at least 2 dimensions; "
            f"got shape {X_arr.shape}"
        )
    if X_arr.shape[0] == 0 or X_arr[0].size == 0:
        raise ValueError(f"X must be non-empty, got shape {X_arr.shape}")
    X_arr = X_arr.astype(np.float32)
    if not np.all(np.isfinite(X_arr)):
        raise ValueError("X must be finite (found NaN or infinity, or values beyond float32)")
    if y_arr.ndim != 1:
        raise ValueError(f"y must be 1-dimensional labels, got shape {y_arr.shape}")
    if y_arr.shape[0] != X_arr.shape[0]:
        raise ValueError(
            f"X and y must have the same length, got {X_arr.shape[0]} and {y_arr.shape[0]}"
        )
    if np.issubdtype(y_arr.dtype, np.floating):
        if not np.all(np.isfinite(y_arr)) or not np.all(y_arr == np.round(y_arr)):
            raise ValueError("y must hold integer class labels, got non-integral values")
    elif not (np.issubdtype(y_arr.dtype, np.integer) or y_arr.dtype == bool):
        raise ValueError(f"y must hold integer class labels, got dtype {y_arr.dtype}")
    y_arr = y_arr.astype(np.int64)
    if y_arr.min() < 0:
        raise ValueError(f"y must hold class labels >= 0, got minimum {int(y_arr.min())}")
    n_classes = np.unique(y_arr).size
    if n_classes < 2:
        raise ValueError(f"y must contain at least 2 classes, got {n_classes}")
    return X_arr, y_arr


def load_npz(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read features and labels from a ``.npz`` file the user already has (never downloads).

    Parameters
    ----------
    path : str or path-like
        A NumPy ``.npz`` archive holding either arrays ``"X"`` and ``"y"`` or ``"x_train"`` and
        ``"y_train"`` (the layout MNIST / CIFAR-10 ``.npz`` copies are often saved in).

    Returns
    -------
    X, y : numpy.ndarray
        As returned by :func:`load_arrays`.

    Raises
    ------
    ValueError
        If the file does not exist, is not an ``.npz`` archive, lacks both key pairs, or holds
        invalid arrays.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "toy.npz"
    >>> np.savez(path, x_train=np.zeros((4, 3)), y_train=np.array([0, 1, 0, 1]))
    >>> X, y = load_npz(path)
    >>> X.shape, y.tolist()
    ((4, 3), [0, 1, 0, 1])
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"path {path!r} does not exist or is not a file")
    # A damaged archive fails in the zip layer (an empty file: EOFError; a truncated or foreign
    # one: BadZipFile), none of them an OSError.
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        archive = np.load(path, allow_pickle=False)
    except unreadable as exc:
        raise ValueError(f"could not read {path!r} as a NumPy .npz archive: {exc}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path!r} is a single .npy array, not an .npz archive with X and y")
    with archive:
        for x_key, y_key in _NPZ_KEYS:
            if x_key in archive.files and y_key in archive.files:
                try:
                    X, y = archive[x_key], archive[y_key]
                except Exception as exc:
                    # A damaged member fails in any layer: zlib.error, a CRC BadZipFile, numpy's
                    # parse of a garbled header (tokenize.TokenError).
                    raise ValueError(f"could not read {path!r}'s arrays: {exc}") from None
                return _named(load_arrays, X, y, where=repr(path))
    raise ValueError(
        f"{path!r} must contain arrays 'X' and 'y' (or 'x_train' and 'y_train'); "
        f"found {sorted(archive.files)}"
    )


def _named(check, *args, where: str):
    """``check(*args)``, its ValueError prefixed with the file or folder the data came from (a
    message like "y must contain at least 2 classes" does not say which file to fix)."""
    try:
        return check(*args)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


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


def _read_file(path: Path) -> bytes:
    """The bytes of ``path``, decompressed when its name ends in ``.gz``."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                return handle.read()
        return path.read_bytes()
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"cannot read {str(path)!r}: {exc}") from None


def _parse_idx(data: bytes, path: Path, ndim: int) -> np.ndarray:
    """An IDX array of unsigned bytes (LeCun et al.'s format of the MNIST files), checked.

    The header is a magic number (two zero bytes, the type code 0x08 for unsigned bytes and the
    number of dimensions), then each dimension's size as a big-endian uint32; the data follow.
    """
    name = str(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(
            f"{name!r} is not an IDX file: its magic number must start with two zero bytes, "
            f"got {data[:4].hex() or 'an empty file'}"
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
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    if len(data) != header + math.prod(shape):
        raise ValueError(
            f"{name!r}: its header announces an array of shape {shape} ({math.prod(shape)} "
            f"bytes) but {len(data) - header} bytes follow (truncated or corrupt file?)"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _mnist_file(folder: Path, name: str) -> Path:
    """``name`` or ``name.gz`` in ``folder`` (or in torchvision's ``MNIST/raw`` below it)."""
    dotted = name.replace("-idx", ".idx")  # a common re-packaging: train-images.idx3-ubyte
    for where in (folder, folder / "MNIST" / "raw"):
        for candidate in (name, f"{name}.gz", dotted, f"{dotted}.gz"):
            if (where / candidate).is_file():
                return where / candidate
    raise ValueError(
        f"no MNIST file {name} (or {name}.gz) in {str(folder)!r}; expected the files as "
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
        If a file is missing or not readable, if its IDX header has a wrong magic number, type
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
    for part in _check_split(split):
        image_file, label_file = (_mnist_file(folder, name) for name in _MNIST_FILES[part])
        part_images = _parse_idx(_read_file(image_file), image_file, 3)
        part_labels = _parse_idx(_read_file(label_file), label_file, 1)
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
        empty or not a whole number of records, if a label lies outside 0–9, or if the labels
        hold a single class.

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
            if not file.is_file():
                raise ValueError(
                    f"no CIFAR-10 batch {name} (or {name}.gz) in {str(folder)!r}; the binary "
                    f"version holds {', '.join(_CIFAR_FILES['train'] + _CIFAR_FILES['test'])}"
                )
            data = _read_file(file)
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


def parse_data_spec(spec: str) -> tuple[str, str | None]:
    """Split a ``"KIND:PATH"`` data specification into its kind and path (reads nothing).

    Parameters
    ----------
    spec : str
        ``"digits"`` (scikit-learn's embedded digits, no path), ``"mnist:DIR"``,
        ``"cifar10:DIR"`` or ``"npz:FILE"``; see :func:`load_data`.

    Returns
    -------
    kind : str
        One of :data:`DATA_KINDS`.
    path : str or None
        The path, with ``~`` expanded; None for ``"digits"``.

    Raises
    ------
    ValueError
        For an unknown kind, a missing path, or a path given to ``digits``.

    Examples
    --------
    >>> parse_data_spec("mnist:/data/mnist")
    ('mnist', '/data/mnist')
    >>> parse_data_spec("digits")
    ('digits', None)
    >>> parse_data_spec("svhn:x")
    Traceback (most recent call last):
    ...
    ValueError: unknown data kind 'svhn' in 'svhn:x'; use digits, mnist:DIR, cifar10:DIR or npz:FILE
    """
    usage = "use digits, mnist:DIR, cifar10:DIR or npz:FILE"
    if not isinstance(spec, str):
        raise ValueError(f"data must be a 'KIND:PATH' string; {usage}; got {spec!r}")
    kind, colon, path = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in DATA_KINDS:
        if not colon:
            raise ValueError(f"data {spec!r} is not of the form KIND:PATH; {usage}")
        raise ValueError(f"unknown data kind {kind!r} in {spec!r}; {usage}")
    if kind == "digits":
        if path.strip():
            raise ValueError(f"digits ships with scikit-learn and takes no path, got {spec!r}")
        return kind, None
    if not path.strip():
        raise ValueError(f"{kind} data needs a path: {kind}:{'FILE' if kind == 'npz' else 'DIR'}")
    return kind, os.path.expanduser(path)


def load_data(spec: str) -> tuple[np.ndarray, np.ndarray]:
    """Read the data a ``"KIND:PATH"`` string names (the entry point of ``rdpest audit --data``).

    Parameters
    ----------
    spec : str
        ``"digits"``: :func:`load_digits_data`; ``"mnist:DIR"``: :func:`load_mnist`;
        ``"cifar10:DIR"``: :func:`load_cifar10`; ``"npz:FILE"``: :func:`load_npz`. MNIST and
        CIFAR-10 give their training split. Nothing is downloaded: the files must exist.

    Returns
    -------
    X : numpy.ndarray, float32
        Features (images for MNIST and CIFAR-10), one per row.
    y : numpy.ndarray of shape (n,), int64
        Labels.

    Raises
    ------
    ValueError
        If ``spec`` is malformed (:func:`parse_data_spec`) or the files cannot be read.

    Examples
    --------
    >>> X, y = load_data("digits")
    >>> X.shape, y.shape
    ((1797, 64), (1797,))
    """
    kind, path = parse_data_spec(spec)
    if kind == "digits":
        return load_digits_data()
    if kind == "mnist":
        return load_mnist(path)
    if kind == "cifar10":
        return load_cifar10(path)
    return load_npz(path)


def split_pretrain(
    X, y, pretrain_fraction: float = 0.5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split data into a pretraining part (for θ₀) and a disjoint audited part, stratified by y.

    Parameters
    ----------
    X, y : array-like
        Features and labels (validated with :func:`load_arrays`).
    pretrain_fraction : float in (0, 1), default 0.5
        Fraction of the rows used for non-private pretraining (the paper uses half).
    seed : int, default 0
        Seed of the shuffle, for reproducibility.

    Returns
    -------
    X_pre, y_pre, X_audit, y_audit : numpy.ndarray
        Disjoint parts; every class keeps (about) its proportion in both.

    Raises
    ------
    ValueError
        If ``pretrain_fraction`` is not strictly between 0 and 1, ``seed`` is not an integer,
        or a part would be too small to hold every class.

    Examples
    --------
    >>> X, y = load_digits_data()
    >>> X_pre, y_pre, X_audit, y_audit = split_pretrain(X, y)
    >>> len(X_pre), len(X_audit)
    (898, 899)
    """
    from sklearn.model_selection import train_test_split

    X, y = load_arrays(X, y)
    if isinstance(pretrain_fraction, bool) or not isinstance(pretrain_fraction, numbers.Real):
        raise ValueError(f"pretrain_fraction must be a number, got {pretrain_fraction!r}")
    if not 0.0 < float(pretrain_fraction) < 1.0:
        raise ValueError(
            f"pretrain_fraction must lie strictly between 0 and 1, got {pretrain_fraction!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    try:
        X_pre, X_audit, y_pre, y_audit = train_test_split(
            X,
            y,
            train_size=float(pretrain_fraction),
            stratify=y,
            random_state=int(seed) % (2**32),
        )
    except ValueError as exc:
        raise ValueError(
            f"cannot split {len(y)} rows with pretrain_fraction={pretrain_fraction} "
            f"stratified by class: {exc}"
        ) from None
    return X_pre, y_pre, X_audit, y_audit

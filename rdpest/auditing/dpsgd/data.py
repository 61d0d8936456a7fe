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

import numbers
import os
import warnings
import zipfile

import numpy as np

from rdpest.auditing.dpsgd.files import load_cifar10, load_mnist

__all__ = [
    "DATA_KINDS",
    "MAX_CLASSES",
    "check_class_count",
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
        distinct classes, all ≥ 0 (a model built for them gets ``max(y) + 1`` outputs:
        :func:`check_class_count`). uint8 ``X`` above 1 (raw pixels) gives a warning: it is
        audited as given.

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
    raw_pixels = X_arr.dtype == np.uint8
    with np.errstate(over="ignore", invalid="ignore"):  # values beyond float32 are refused below
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
    if y_arr.size and float(np.min(y_arr)) < 0:
        raise ValueError(f"y must hold class labels >= 0, got minimum {np.min(y_arr)}")
    labels = np.unique(y_arr)
    if labels.size < 2:
        raise ValueError(f"y must contain at least 2 classes, got {labels.size}")
    if float(labels[-1]) >= 2**62:  # not a class number (1e20 wrapped to a negative int64)
        raise ValueError(f"y must hold class numbers, got a label of {labels[-1]}")
    if raw_pixels and X_arr.max() > 1:
        warnings.warn(
            f"X is uint8 with values up to {X_arr.max():g} (raw pixels?): it is audited as given; "
            "divide by 255 first if the pipeline you audit trains on pixels in [0, 1]",
            stacklevel=2,
        )
    return X_arr, y_arr.astype(np.int64)


#: The most classes a model is built for from the labels (``max(y) + 1`` outputs): beyond, a
#: label is far more likely a code than a class number (ImageNet-21k has 21,841 classes).
MAX_CLASSES = 1 << 16


def check_class_count(y) -> int:
    """The number of outputs a model built for labels ``y`` gets, ``max(y) + 1``, checked.

    More than :data:`MAX_CLASSES` is refused: the output layer alone would take gigabytes.
    Labels that leave most of ``0..max(y)`` unused (beyond ten outputs) give a warning: every
    unused number is an output trained towards zero, and ``np.unique(y, return_inverse=True)[1]``
    numbers the classes 0..k-1.

    Examples
    --------
    >>> check_class_count(np.array([0, 1, 2, 1]))
    3
    """
    y = np.asarray(y)
    outputs, classes = int(y.max()) + 1, np.unique(y).size
    if outputs > MAX_CLASSES:
        raise ValueError(
            f"y's labels go up to {outputs - 1}: a model for them would get {outputs} outputs "
            f"(more than {MAX_CLASSES}) for {classes} distinct labels; number the classes "
            f"0..{classes - 1} (np.unique(y, return_inverse=True)[1])"
        )
    if outputs > max(10, 2 * classes):
        warnings.warn(
            f"y's labels go up to {outputs - 1} but only {classes} distinct labels occur: the "
            f"model gets {outputs} outputs, most for classes with no example",
            stacklevel=2,
        )
    return outputs


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
    path = os.path.expanduser(os.fspath(path))
    if not os.path.isfile(path):
        raise ValueError(f"path {path!r} does not exist or is not a file")
    # A damaged archive fails in the zip layer (an empty file: EOFError; a truncated or foreign
    # one: BadZipFile), none of them an OSError.
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        archive = np.load(path, allow_pickle=False)
    except unreadable as exc:
        if "allow_pickle" in str(exc):  # numpy's guess for a file that is no NumPy format
            exc = "it is neither an .npz archive nor an .npy array (rdpest never unpickles files)"
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
        drive = len(kind) == 1 and kind.isalpha()  # C:\data\x.npz: a drive, no kind
        hint = f" (a drive letter? name the kind first, e.g. npz:{spec.strip()})" if drive else ""
        raise ValueError(f"unknown data kind {kind!r} in {spec!r}{hint}; {usage}")
    if kind == "digits":
        if path.strip():
            raise ValueError(f"digits ships with scikit-learn and takes no path, got {spec!r}")
        return kind, None
    if not path.strip():
        raise ValueError(f"{kind} data needs a path: {kind}:{'FILE' if kind == 'npz' else 'DIR'}")
    return kind, os.path.expanduser(path.strip())


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

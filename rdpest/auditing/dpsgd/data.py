"""Data for DP-SGD audits: the embedded default data set and loaders for a user's own arrays.

The default data is scikit-learn's copy of the UCI optical digits (``sklearn.datasets.load_digits``:
1797 grey-scale 8×8 images of the digits 0–9, 16 intensity levels), which ships inside
scikit-learn, so an audit runs with no download. Users audit their own data (MNIST, CIFAR-10, …)
by passing arrays (:func:`load_arrays`) or a ``.npz`` file they already have (:func:`load_npz`);
nothing here ever downloads.

The audit set-up follows Kim, Varshney & Alabi (2026, Sec. 4) and Nasr et al. 2023,
"Tight Auditing of Differentially Private Machine Learning": half of the data pretrains the
worst-case initial parameters θ₀ non-privately, the disjoint other half is the audited training
set (:func:`split_pretrain`).
"""

from __future__ import annotations

import numbers
import os

import numpy as np

__all__ = ["load_arrays", "load_digits_data", "load_npz", "split_pretrain"]

_NPZ_KEYS = (("X", "y"), ("x_train", "y_train"))


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
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"could not read {path!r} as a NumPy .npz archive: {exc}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path!r} is a single .npy array, not an .npz archive with X and y")
    with archive:
        for x_key, y_key in _NPZ_KEYS:
            if x_key in archive.files and y_key in archive.files:
                return load_arrays(archive[x_key], archive[y_key])
    raise ValueError(
        f"{path!r} must contain arrays 'X' and 'y' (or 'x_train' and 'y_train'); "
        f"found {sorted(archive.files)}"
    )


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

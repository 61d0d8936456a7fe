"""Process hygiene: joblib workers that end with the process that started them, and a C heap
that keeps the memory a training step frees.

An audit killed with SIGKILL runs no handler, and loky's idle workers can outlive it for minutes,
blocked on a pipe. :func:`end_with_parent` is a worker initializer that asks the Linux kernel to
send the worker SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere it does
nothing, and the workers' idle timeout is the remaining safeguard.

Torch allocates CPU tensors with the C library's ``malloc``. With glibc's defaults a block of a
few megabytes is often handed back to the kernel when it is freed (mapped on its own, or trimmed
from the top of the heap), and the next step's tensor of the same size is mapped again and
zero-filled page by page by the kernel. A DP-SGD step allocates and frees the same tensors every
step, so a step's page faults recur at every step (``python benchmarks/bench_heap.py`` measures
them and the step time with and without the options below). :func:`keep_freed_heap` sets
glibc's ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` (``mallopt``, see ``man 3 mallopt``) so
that such blocks stay in the heap and are reused. It changes where memory comes from, never what
is computed. The cost: up to :data:`HEAP_KEPT_BYTES` of freed heap stay with the process until
it ends, and blocks that were mapped on their own now share the heap, where fragmentation may
hold a little more memory at the peak.
"""

from __future__ import annotations

import os
import platform
import signal
import sys

__all__ = ["HEAP_KEPT_BYTES", "MMAP_THRESHOLD_BYTES", "end_with_parent", "keep_freed_heap"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# mallopt's parameters, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Free memory at the top of the heap that glibc keeps instead of returning it to the kernel.
HEAP_KEPT_BYTES = 256 << 20
#: Blocks from this size up are mapped on their own (and unmapped when freed): 32 MiB, the
#: largest value glibc takes on 64-bit systems and the ceiling of its own adaptive threshold.
MMAP_THRESHOLD_BYTES = 32 << 20
# Whether keep_freed_heap has set the options in this process (None: not asked yet).
_heap_kept: bool | None = None


def end_with_parent(parent: int | None = None) -> None:
    """Worker initializer: end this process when its parent dies (Linux; a no-op elsewhere).

    ``parent``: the process id of the process that started the worker, passed by it (as
    ``initargs=(os.getpid(),)``). A worker imports the package before its initializer runs,
    which takes seconds; a parent killed meanwhile sends no signal (none was asked for yet), so
    once the request is made the worker ends itself if ``parent`` is no longer its parent and
    no longer runs. Without ``parent``, only a parent that dies during this call is caught.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    expected = os.getppid() if parent is None else int(parent)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
        return
    # Orphaned before the request took effect. Under the forkserver start method a worker's
    # parent is the fork server, not ``parent``: only a ``parent`` that has ended counts.
    if os.getppid() != expected and not _running(expected):
        os.kill(os.getpid(), signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs; a zombie (ended, not yet reaped) does not."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def keep_freed_heap() -> bool:
    """Keep freed blocks of up to :data:`MMAP_THRESHOLD_BYTES` in the C heap for reuse (glibc).

    Called by the DP-SGD trainers before they train on the CPU; the first call in a process
    sets the options (see the module docstring) and later calls return the same answer. Set the
    environment variable ``RDPEST_KEEP_HEAP=0`` before the first call to leave glibc's defaults.

    Returns
    -------
    bool
        Whether the options are set in this process: False on other C libraries and systems,
        where nothing is changed, and where ``RDPEST_KEEP_HEAP=0``.
    """
    global _heap_kept
    if _heap_kept is None:
        _heap_kept = _set_heap_options(_glibc())
    return _heap_kept


def _glibc():
    """The running glibc's functions through ctypes, or None on any other C library."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    import ctypes

    try:
        return ctypes.CDLL(None)
    except OSError:  # pragma: no cover - a process without a loadable C library
        return None


def _set_heap_options(libc) -> bool:
    """Set the two options through ``libc.mallopt`` (each returns 1 on success)."""
    if libc is None or os.environ.get("RDPEST_KEEP_HEAP", "1").strip() == "0":
        return False
    try:
        mallopt = libc.mallopt
    except AttributeError:  # pragma: no cover - glibc always has it
        return False
    # The mmap threshold first: setting either option turns off glibc's adaptive thresholds.
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    return mallopt(_M_TRIM_THRESHOLD, HEAP_KEPT_BYTES) == 1 and ok

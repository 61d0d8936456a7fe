"""Worker-process hygiene: joblib workers that end with the process that started them.

An audit killed with SIGKILL runs no handler, and loky's idle workers can outlive it for minutes,
blocked on a pipe. :func:`end_with_parent` is a worker initializer that asks the Linux kernel to
send the worker SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere it does
nothing, and the workers' idle timeout is the remaining safeguard.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["end_with_parent"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def end_with_parent() -> None:
    """Worker initializer: end this process when its parent dies (Linux; a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)

"""Sphinx-Gallery's hooks for the rdpest documentation (named in ``sphinx_gallery_conf``).

The examples run in their quick mode (``--quick``: smaller samples, fewer seeds) so that a
documentation build, and the test that builds it, stay short; their files go to a temporary
directory, removed when the build ends, never into the checkout.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile

_OUTPUT: list[str] = []


def quick_argv(gallery_conf, script_vars) -> list[str]:
    """The command-line arguments every example runs with: ``--quick --out TMPDIR``."""
    if not _OUTPUT:
        _OUTPUT.append(tempfile.mkdtemp(prefix="rdpest-gallery-"))
        atexit.register(shutil.rmtree, _OUTPUT[0], ignore_errors=True)
    return ["--quick", "--out", _OUTPUT[0]]

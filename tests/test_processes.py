"""rdpest.utils.processes.keep_freed_heap: glibc keeps a training step's freed blocks for reuse,
and what is trained does not change."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from rdpest.utils import processes
from rdpest.utils.processes import HEAP_KEPT_BYTES, MMAP_THRESHOLD_BYTES, _set_heap_options

ROOT = Path(__file__).resolve().parents[1]
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


class _FakeLibc:
    def __init__(self, answer: int = 1):
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, option: int, value: int) -> int:
        self.calls.append((option, value))
        return self.answer


def test_the_two_options_are_set_with_glibcs_numbers(monkeypatch):
    monkeypatch.delenv("RDPEST_KEEP_HEAP", raising=False)
    libc = _FakeLibc()
    assert _set_heap_options(libc) is True
    # M_MMAP_THRESHOLD is -3 and M_TRIM_THRESHOLD is -1 in glibc's <malloc.h>.
    assert libc.calls == [(-3, MMAP_THRESHOLD_BYTES), (-1, HEAP_KEPT_BYTES)]
    assert MMAP_THRESHOLD_BYTES == 32 << 20  # glibc refuses more on 64-bit systems


def test_a_refused_option_is_reported_and_the_opt_out_changes_nothing(monkeypatch):
    monkeypatch.delenv("RDPEST_KEEP_HEAP", raising=False)
    assert _set_heap_options(_FakeLibc(answer=0)) is False
    assert _set_heap_options(None) is False  # not glibc
    monkeypatch.setenv("RDPEST_KEEP_HEAP", "0")
    libc = _FakeLibc()
    assert _set_heap_options(libc) is False and libc.calls == []


def test_the_options_are_set_once_per_process(monkeypatch):
    libc = _FakeLibc()
    monkeypatch.delenv("RDPEST_KEEP_HEAP", raising=False)
    monkeypatch.setattr(processes, "_heap_kept", None)
    monkeypatch.setattr(processes, "_glibc", lambda: libc)
    assert processes.keep_freed_heap() and processes.keep_freed_heap()
    assert len(libc.calls) == 2


def _child(code: str, keep: str) -> dict:
    env = {**os.environ, "RDPEST_KEEP_HEAP": keep}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_HEAP = """
import ctypes, json, torch
from rdpest.utils.processes import keep_freed_heap
class Info(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
kept = keep_freed_heap()
before = libc.mallinfo2().hblkhd
block = torch.ones(20 << 18)  # 20 MiB of float32, below the 32 MiB threshold
mapped = libc.mallinfo2().hblkhd - before
del block
print(json.dumps({"kept": kept, "mapped": mapped, "free": libc.mallinfo2().fordblks}))
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc options (Linux with glibc only)")
def test_a_freed_tensor_stays_in_the_heap_and_glibcs_default_returns_it():
    """mallinfo2 (glibc >= 2.33): where a 20 MiB tensor's block came from and where it went.

    The opt-out child is the positive control: with glibc's defaults the block is mapped on its
    own and unmapped when freed, which the kept heap's assertions would fail on."""
    mib = 1 << 20
    kept = _child(_HEAP, "1")
    assert kept["kept"] is True
    assert kept["mapped"] == 0 and kept["free"] >= 20 * mib
    default = _child(_HEAP, "0")
    assert default["kept"] is False
    assert default["mapped"] >= 20 * mib and default["free"] < 20 * mib


_TRAIN = """
import hashlib, json, numpy as np, torch
from rdpest.auditing.dpsgd.models import make_model
from rdpest.auditing.dpsgd.training import train_dp_sgd, train_dp_sgd_many
from rdpest.utils import processes
rng = np.random.default_rng(0)
X, y = rng.random((24, 64), dtype=np.float32), rng.integers(0, 10, 24)
torch.manual_seed(0)
digest = hashlib.sha256()
for kind in ("mlp", "cnn"):
    model = make_model(kind, 64, 10)
    many = train_dp_sgd_many(model, X, y, seeds=[1, 2], noise_multiplier=1.0, steps=3)
    one = train_dp_sgd(model, X, y, noise_multiplier=1.0, steps=3, seed=1)
    for net in [*many, one]:
        for value in net.state_dict().values():
            digest.update(value.detach().numpy().tobytes())
print(json.dumps({"kept": processes._heap_kept, "digest": digest.hexdigest()}))
"""


def test_training_sets_the_options_and_trains_the_same_models_without_them():
    """Bit for bit: the heap options move no arithmetic (stacked and single runs, with noise)."""
    kept = _child(_TRAIN, "1")
    default = _child(_TRAIN, "0")
    assert kept["kept"] is GLIBC  # the trainers asked for the options
    assert default["kept"] is False
    assert kept["digest"] == default["digest"]


def test_the_heap_benchmark_pairs_each_kept_child_with_its_own_glibc_child():
    """benchmarks/bench_heap.py reports the median of per-pair rate ratios (the host's speed
    drifts between pairs, so unpaired medians can hide or invent a difference)."""
    import importlib.util

    path = ROOT / "benchmarks" / "bench_heap.py"
    spec = importlib.util.spec_from_file_location("bench_heap", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def cell(pair, keep, rate):
        return {
            "model": "cnn",
            "keep_heap": keep,
            "pair": pair,
            "copies": 4,
            "models_per_second": rate,
            "minor_faults": 10 if keep else 1000,
            "system_seconds": 0.0,
            "peak_rss_mb": 500.0,
        }

    # Pair 0 on a slow host, pair 1 on one twice as fast: kept is 10% faster within each pair.
    cells = [cell(0, False, 1.0), cell(0, True, 1.1), cell(1, False, 2.0), cell(1, True, 2.2)]
    glibc, kept = bench.summarise(cells)
    assert kept["paired_ratios"] == pytest.approx([1.1, 1.1])
    assert kept["paired_ratio_median"] == pytest.approx(1.1) and kept["pairs_faster"] == 2
    assert glibc["minor_faults"] == 1000 and "paired_ratios" not in glibc
    assert "1.10 (2 of 2)" in bench.table([glibc, kept], pairs=2)


# A worker that was orphaned before its initializer ran: "parent" sleeps while the child starts
# (as a loky worker imports the package for seconds), the test kills "parent", and only then does
# the child call end_with_parent with the pid it was given.
_ORPHAN = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import os, sys, time
time.sleep(3)  # the worker's start-up: its parent is killed meanwhile
from rdpest.utils.processes import end_with_parent
end_with_parent(int(sys.argv[1]))
time.sleep(60)  # an orphan that did not end itself would idle here
''', str(os.getpid())])
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_orphaned_while_it_starts_ends_itself():
    """Found probing why loky workers outlived a SIGKILLed audit: a worker imports rdpest (and
    torch) before its initializer runs, and a parent killed in those seconds had asked for no
    signal yet, while end_with_parent compared the parent with itself (read after the orphaning)
    and so never noticed. With the parent's pid handed over (initargs), the orphan ends itself."""
    import signal
    import time

    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and processes._running(child):
        time.sleep(0.2)
    alive = processes._running(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the orphaned worker did not end itself"


def test_end_with_parent_leaves_a_worker_with_its_parent_running():
    """Diff reviewer's finding: under loky's forkserver start method a worker's parent is the
    fork server, not the process that handed over its pid, and every worker killed itself. A
    handed-over process that still runs (pid 1 here, not the child's parent) keeps it alive."""
    code = "from rdpest.utils.processes import end_with_parent; import os\n"
    code += "end_with_parent(os.getppid()); end_with_parent(); end_with_parent(1); print('alive')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr

"""Append-only run store of an audit: finished runs survive interruption, a re-run resumes.

Layout of a store directory::

    config.json   the audit's fingerprint, created once and exclusively; an audit with another
                  configuration is refused
    runs.jsonl    one JSON record per finished run: {"arm": 0|1, "index": i, "seed": s,
                  "score": x, "pipeline": p} (p: a digest of config.json as stored),
                  appended with one write and an fsync as each run finishes
    analyses.jsonl  one JSON record per analysis of the runs (the claim, the level, the
                  schedule and the verdict), appended as each audit finishes
    result.json   the latest analysis's result
    .lock         an advisory lock held while an audit uses the store (one writer at a time)

What a store guarantees, and how:

- **One pipeline per store.** The configuration is written once with an exclusive create; a
  store whose ``config.json`` differs from the audit's is refused, and so is a store that has runs
  but no configuration (it cannot prove which pipeline wrote them).
- **One writer at a time.** Opening a store takes an exclusive advisory lock on ``.lock`` (through
  the ``filelock`` package: ``flock`` on POSIX), held until :meth:`RunStore.close`. A second audit
  on the same directory is refused at once with a message saying so; the operating system drops
  the lock of a killed process, so a killed audit can always be resumed.
- **Records are checked, not trusted.** A record must be a JSON object with ``arm`` 0 or 1, an
  integer ``index`` >= 0, the ``seed`` that the audit derives for that run (``expected_seed``)
  and a finite ``score``, and where it carries a ``pipeline`` digest, this store's. Anything else
  (a record cut short by a crash, an overflowing number, a deeply nested line, runs copied from
  an audit with another seed or from another pipeline's store) is dropped with a warning and the
  run is redone; two different scores for one run are both dropped, with a warning. (Records
  written before they carried the digest are checked without it.)
- **Every analysis is recorded.** Testing one claim on the same runs again under another level
  or schedule spends the level again; ``analyses.jsonl`` keeps each analysis, so an audit can
  say which earlier ones tested its claim (:class:`rdpest.auditing.Auditor` does).
- **Files are never followed through links** (a symlinked ``runs.jsonl`` is refused) and are
  created with the umask's mode, so collaborators can read and resume.

JSON, never pickle: a store can be read by anything and cannot execute code when loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable
from numbers import Integral, Real
from pathlib import Path

from filelock import FileLock, Timeout

from rdpest.utils.io import atomic_write_text, load_json, refuse_symlink

__all__ = ["RunStore"]

logger = logging.getLogger(__name__)


def _short(value, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _differences(stored: dict, wanted: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two configurations (nested dicts opened)."""
    changed = []
    for key in sorted(set(stored) | set(wanted), key=str):
        a, b = stored.get(key), wanted.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changed += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            changed.append(f"{prefix}{key} (stored {_short(a)}, now {_short(b)})")
    return changed


def store_path(directory) -> Path:
    """A store directory given as a str or path, as a Path; a ValueError for anything else and for
    an empty string (``Path("")`` is the current directory, which would take the store's files).
    """
    if not isinstance(directory, str | os.PathLike) or isinstance(directory, bytes):
        raise ValueError(f"store must be a directory's path (str or Path), got {directory!r}")
    if isinstance(directory, str) and not directory.strip():
        raise ValueError("store is an empty path; give the store directory's path")
    return Path(directory)


class RunStore:
    """Persist finished runs of an audit under ``directory`` (see the module docstring).

    Use it as a context manager (or call :meth:`close`): the store's lock is held from
    construction until then.

    Parameters
    ----------
    directory : path
        The store directory (created if missing).
    config : dict
        The audit's fingerprint (JSON-serialisable).
    expected_seed : callable ``(arm, index) -> int``, optional
        The seed the audit derives for each run; records with another seed are dropped.

    Raises
    ------
    ValueError
        If the directory is a file, another audit holds the store, the store belongs to another
        configuration or has runs without a configuration, or a store file is a link.

    Examples
    --------
    >>> import tempfile
    >>> with RunStore(tempfile.mkdtemp(), {"mechanism": "demo"}) as store:
    ...     store.append(arm=1, index=0, seed=42, score=0.5)
    ...     store.load()
    {(1, 0): 0.5}
    """

    def __init__(
        self,
        directory,
        config: dict,
        expected_seed: Callable[[int, int], int] | None = None,
    ):
        self.directory = store_path(directory)
        try:
            self.config = json.loads(json.dumps(config, sort_keys=True, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"the audit configuration must be JSON-serialisable (finite numbers, strings, "
                f"lists and dicts): {exc}"
            ) from None
        self.expected_seed = expected_seed
        if self.directory.exists() and not self.directory.is_dir():
            raise ValueError(f"the store {self.directory} exists and is not a directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"cannot create the store directory {self.directory}: {exc}") from None
        self.config_path = self.directory / "config.json"
        self.runs_path = self.directory / "runs.jsonl"
        self.analyses_path = self.directory / "analyses.jsonl"
        for path, what in (
            (self.config_path, "the store's config.json"),
            (self.runs_path, "the store's runs.jsonl"),
            (self.analyses_path, "the store's analyses.jsonl"),
        ):
            refuse_symlink(path, what)
        self._lock = FileLock(self.directory / ".lock", timeout=0)
        try:
            self._lock.acquire()
        except Timeout:
            raise ValueError(
                f"the store {self.directory} is in use by another audit (its lock "
                f"{self.directory / '.lock'} is held); wait for that audit to finish, or use "
                "another store directory"
            ) from None
        except OSError as exc:
            raise ValueError(f"cannot lock the store {self.directory}: {exc}") from None
        try:
            self._claim_config()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Release the store's lock (idempotent)."""
        lock = getattr(self, "_lock", None)
        if lock is not None and lock.is_locked:
            lock.release()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:  # a store dropped without close() must not keep the lock
        self.close()

    # ------------------------------------------------------------------ configuration
    def _claim_config(self) -> None:
        text = json.dumps(self.config, indent=2, sort_keys=True)
        if not self.config_path.exists():
            if self.runs_path.exists() and self.runs_path.stat().st_size > 0:
                raise ValueError(
                    f"the store {self.directory} has runs ({self.runs_path.name}) but no "
                    "config.json, so nothing says which pipeline wrote them; use another store "
                    "directory (or delete the runs to start over)"
                )
            # Exclusive create: the configuration is written whole to a temporary file and
            # linked into place, which fails if another writer created it first.
            tmp = self.directory / f".config.json.{os.getpid()}.tmp"
            atomic_write_text(tmp, text)
            try:
                os.link(tmp, self.config_path)
            except FileExistsError:
                pass  # created meanwhile: compared below like any existing configuration
            finally:
                tmp.unlink(missing_ok=True)
        try:
            stored = load_json(self.config_path.read_text())
        except (OSError, ValueError, RecursionError) as exc:
            raise ValueError(
                f"the store's configuration {self.config_path} is damaged or unreadable ({exc}); "
                "use another store directory"
            ) from None
        # Each record carries a digest of the STORED configuration (runs copied in from another
        # pipeline's store, whose seeds are the same for the same random_state, are not adopted).
        # Not of this audit's: the comparison below accepts 1 for 1.0, whose JSON text differs.
        canonical = json.dumps(stored, sort_keys=True, separators=(",", ":"))
        self.pipeline_digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        if stored != self.config:
            changed = _differences(stored, self.config) if isinstance(stored, dict) else []
            changed = changed or ["(not a JSON object)"]
            raise ValueError(
                f"the store {self.directory} was written by a different audit configuration "
                f"(differs in: {', '.join(changed)}); use another store directory or the "
                "same configuration to resume"
            )

    # ------------------------------------------------------------------ runs
    def _parse(self, line: bytes) -> tuple[tuple[int, int], float]:
        """One record's (arm, index) and score, or ValueError saying what is wrong with it."""
        try:
            record = load_json(line)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"not JSON ({type(exc).__name__})") from None
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        arm, index, seed, score = (record.get(k) for k in ("arm", "index", "seed", "score"))
        for value, name in ((arm, "arm"), (index, "index"), (seed, "seed")):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
                raise ValueError(f"{name} is not a non-negative integer")
        if arm not in (0, 1):
            raise ValueError("arm is not 0 or 1")
        if isinstance(score, bool) or not isinstance(score, Real) or not math.isfinite(score):
            raise ValueError("score is not a finite number")
        if self.expected_seed is not None and int(seed) != self.expected_seed(arm, index):
            raise ValueError("its seed is not the one this audit derives for that run")
        if "pipeline" in record and record["pipeline"] != self.pipeline_digest:
            raise ValueError(
                "it was written by another pipeline (its pipeline digest is not this store's)"
            )
        return (int(arm), int(index)), float(score)

    def load(self) -> dict[tuple[int, int], float]:
        """Finished runs as {(arm, index): score}; damaged records are dropped from the file."""
        refuse_symlink(self.runs_path, "the store's runs.jsonl")
        if not self.runs_path.exists():
            return {}
        raw = self.runs_path.read_bytes()
        lines = raw.split(b"\n")
        kept: dict[tuple[int, int], tuple[float, bytes]] = {}
        conflicting: set[tuple[int, int]] = set()
        for number, line in enumerate(lines):
            if not line:
                continue
            try:
                if number == len(lines) - 1:  # no newline after it: cut short by a crash
                    raise ValueError("incomplete record")
                key, score = self._parse(line)
            except ValueError as exc:
                logger.warning(
                    "dropping a damaged run record in %s (line %d: %s); the run will be redone",
                    self.runs_path,
                    number + 1,
                    exc,
                )
                continue
            if key in kept and kept[key][0] != score:
                conflicting.add(key)
            kept.setdefault(key, (score, line))
        for key in sorted(conflicting):
            logger.warning(
                "dropping run %s of arm %d in %s: the store holds different scores for it; "
                "the run will be redone",
                key[1],
                key[0],
                self.runs_path,
            )
            del kept[key]
        repaired = b"".join(line + b"\n" for _, line in kept.values())
        if repaired != raw:
            atomic_write_text(self.runs_path, repaired.decode())
        return {key: score for key, (score, _) in kept.items()}

    def append(self, *, arm: int, index: int, seed: int, score: float) -> None:
        """Persist one finished run (one write, flushed and fsynced)."""
        record = {"arm": int(arm), "index": int(index), "seed": int(seed), "score": score}
        line = json.dumps({**record, "pipeline": self.pipeline_digest})
        _append_line(self.runs_path, line, "the store's runs.jsonl")

    def analyses(self) -> list[dict]:
        """The analyses recorded in ``analyses.jsonl``, oldest first (unreadable lines skipped:
        the record is informative, never a reason to refuse the runs)."""
        refuse_symlink(self.analyses_path, "the store's analyses.jsonl")
        if not self.analyses_path.exists():
            return []
        try:
            text = self.analyses_path.read_text(errors="replace")
        except OSError as exc:
            logger.warning("cannot read %s (%s): earlier analyses unknown", self.analyses_path, exc)
            return []
        found, unreadable = [], 0
        for line in text.splitlines():
            try:
                entry = load_json(line)
            except (ValueError, RecursionError):
                entry = None
            if isinstance(entry, dict):
                found.append(entry)
            elif line.strip():
                unreadable += 1
        if unreadable:
            logger.warning(
                "%d record(s) in %s cannot be read (cut short or edited): the analyses they "
                "recorded, and the levels those spent, are not counted",
                unreadable,
                self.analyses_path,
            )
        return found

    def record_analysis(self, entry: dict) -> None:
        """Append one analysis of the runs (one write, flushed and fsynced)."""
        line = json.dumps(entry, sort_keys=True, allow_nan=False)
        try:
            _append_line(self.analyses_path, line, "the store's analyses.jsonl")
        except OSError as exc:  # the record informs; it never costs the audit its result
            logger.warning("cannot record this analysis in %s (%s)", self.analyses_path, exc)


def _append_line(path: Path, line: str, what: str) -> None:
    """Append one line to ``path`` with one write, flushed and fsynced, never through a link."""
    refuse_symlink(path, what)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "a+b") as handle:
        # A last line cut short by a crash has no newline: start on a new line, or this record
        # would join the broken one and be lost with it.
        size = os.fstat(fd).st_size
        cut_short = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        handle.write(("\n" if cut_short else "").encode() + (line + "\n").encode())
        handle.flush()
        os.fsync(handle.fileno())

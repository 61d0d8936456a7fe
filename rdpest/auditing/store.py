"""Append-only run store of an audit: finished runs survive interruption, a re-run resumes.

Layout of a store directory::

    config.json   the audit's fingerprint (written once, atomically); a re-run with another
                  configuration is refused
    runs.jsonl    one JSON record per finished run: {"arm": 0|1, "index": i, "seed": s,
                  "score": x}, appended with one write and an fsync as each run finishes

JSON, never pickle: a store can be read by anything and cannot execute code when loaded. A record
cut short by a crash (no trailing newline, or unparsable) is detected on load, dropped from the
file, and its run is redone.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

from rdpest.utils.io import atomic_write_text

__all__ = ["RunStore", "atomic_write_text"]

logger = logging.getLogger(__name__)


class RunStore:
    """Persist finished runs of an audit under ``directory`` (see the module docstring).

    Examples
    --------
    >>> import tempfile
    >>> store = RunStore(tempfile.mkdtemp(), {"mechanism": "demo"})
    >>> store.append(arm=1, index=0, seed=42, score=0.5)
    >>> store.load()
    {(1, 0): 0.5}
    """

    def __init__(self, directory, config: dict):
        self.directory = Path(directory)
        self.config = json.loads(json.dumps(config, sort_keys=True))  # JSON-normalised copy
        self.directory.mkdir(parents=True, exist_ok=True)
        config_path = self.directory / "config.json"
        if config_path.exists():
            stored = json.loads(config_path.read_text())
            if stored != self.config:
                changed = sorted(
                    key
                    for key in set(stored) | set(self.config)
                    if stored.get(key) != self.config.get(key)
                )
                raise ValueError(
                    f"the store {self.directory} was written by a different audit configuration "
                    f"(differs in: {', '.join(changed)}); use another store directory or the "
                    "same configuration to resume"
                )
        else:
            atomic_write_text(config_path, json.dumps(self.config, indent=2, sort_keys=True))
        self.runs_path = self.directory / "runs.jsonl"

    def load(self) -> dict[tuple[int, int], float]:
        """Finished runs as {(arm, index): score}; repairs a truncated last record."""
        if not self.runs_path.exists():
            return {}
        raw = self.runs_path.read_bytes()
        lines = raw.split(b"\n")
        complete, finished = [], {}
        for number, line in enumerate(lines):
            if not line:
                continue
            is_last_unterminated = number == len(lines) - 1  # no newline after it
            try:
                record = json.loads(line)
                key = (int(record["arm"]), int(record["index"]))
                score = float(record["score"])
                if is_last_unterminated or not math.isfinite(score):
                    raise ValueError("incomplete record")
            except (ValueError, KeyError, TypeError):
                logger.warning(
                    "dropping a damaged run record in %s (line %d); the run will be redone",
                    self.runs_path,
                    number + 1,
                )
                continue
            finished[key] = score
            complete.append(line)
        repaired = b"".join(line + b"\n" for line in complete)
        if repaired != raw:
            atomic_write_text(self.runs_path, repaired.decode())
        return finished

    def append(self, *, arm: int, index: int, seed: int, score: float) -> None:
        """Persist one finished run (one write, flushed and fsynced)."""
        line = json.dumps({"arm": int(arm), "index": int(index), "seed": int(seed), "score": score})
        with open(self.runs_path, "a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

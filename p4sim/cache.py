"""Bounded on-disk caches: what p4sim and the harness keep under ~/.cache (compiled programs'
native libraries, embedded compiles) is kept to its most recently used entries.

An entry's modification time is its last use: a hit touches it, and storing a new entry removes
the least recently used ones beyond the cache's limit. Removing a library another process has
loaded is safe (its mapping outlives the name), and a process that finds an entry gone builds it
again, so pruning never breaks a run; it only costs a rebuild of something long unused.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def touch(entry: Path) -> None:
    """Mark ``entry`` used now (a read-only cache keeps its old order)."""
    with contextlib.suppress(OSError):
        os.utime(entry)


def prune(directory: Path, pattern: str, keep: int) -> list[Path]:
    """Remove all but the ``keep`` most recently used entries of ``directory`` matching
    ``pattern`` (files or folders); returns what was removed."""
    entries = []
    for path in directory.glob(pattern):
        with contextlib.suppress(OSError):
            entries.append((path.stat().st_mtime, path))
    entries.sort(reverse=True)
    removed = []
    for _, path in entries[keep:]:
        with contextlib.suppress(OSError):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
    return removed

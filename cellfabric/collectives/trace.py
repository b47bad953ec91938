"""A user's sequence of collectives as a plain JSON trace: ``--workload trace:FILE``.

The file is a list (or {"collectives": [...]}) of entries
``{"op": "all-reduce", "size": 1048576, "group": [0, 1, 2, 3], "algorithm": "allreduce-tree",
"after": [0]}``: ``op`` one of iteration.OPS (``send``: group [src, dst]), ``size`` nccl-tests'
size in bytes, ``group`` the ranks (indices into the fabric's hosts in order), ``algorithm``
optional (the op's default: a ring, a pairwise all-to-all, a chain broadcast), ``after``
optional: the indices of earlier entries it waits for. Without ``after``, an entry waits for
the entry before it (a trace is sequential unless it says otherwise); ``"after": []`` starts
it with the first phase.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cellfabric.collectives.iteration import Call, check_calls
from cellfabric.core.workloads import WorkloadError

FIELDS = ("op", "size", "group", "algorithm", "after", "label")


def _ints(value: Any, at: str, name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise WorkloadError(f"{at}: {name} {json.dumps(value)} is not a list of integers")
    return tuple(value)


def call_from(entry: Any, index: int, where: str) -> Call:
    at = f"{where} entry {index}"
    if not isinstance(entry, dict):
        raise WorkloadError(f"{at}: expected an object with op, size and group")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise WorkloadError(f"{at}: unknown field '{unknown[0]}' (expected "
                            f"{', '.join(FIELDS)})")
    for need in ("op", "size", "group"):
        if need not in entry:
            raise WorkloadError(f"{at}: missing field '{need}'")
    size = entry["size"]
    if not isinstance(size, int) or isinstance(size, bool):
        raise WorkloadError(f"{at}: size {json.dumps(size)} is not an integer byte count")
    after = (_ints(entry["after"], at, "after") if "after" in entry
             else ((index - 1,) if index else ()))
    algorithm = entry.get("algorithm")
    if algorithm is not None and not isinstance(algorithm, str):
        raise WorkloadError(f"{at}: algorithm {json.dumps(algorithm)} is not a name")
    return Call(str(entry["op"]), size, _ints(entry["group"], at, "group"), after, algorithm,
                str(entry.get("label", "")))


def load_trace(path: Path, nranks: int) -> list[Call]:
    where = str(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise WorkloadError(f"--workload trace:{path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise WorkloadError(f"{where}: not JSON ({exc})") from None
    if isinstance(doc, dict) and "collectives" in doc:
        doc = doc["collectives"]
    if not isinstance(doc, list) or not doc:
        raise WorkloadError(f"{where}: expected a non-empty list of collectives")
    calls = [call_from(entry, i, where) for i, entry in enumerate(doc)]
    check_calls(calls, nranks, where)
    return calls

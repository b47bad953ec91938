"""P4 Runtime ids and aliases as p4c assigns them: id = resource-type prefix << 24 | (jenkins
one-at-a-time hash of the fully-qualified name & 0xffffff), collisions resolved by probing
upwards in sorted-name order, `@id` honored; alias = shortest unique dotted suffix."""

from __future__ import annotations

from p4.config.v1 import p4info_pb2 as P

from p4sim.frontend import ast as A
from p4sim.frontend.errors import CompileError

PREFIX = {"action": P.P4Ids.ACTION, "table": P.P4Ids.TABLE, "value_set": P.P4Ids.VALUE_SET,
          "controller_header": P.P4Ids.CONTROLLER_HEADER,
          "action_profile": P.P4Ids.ACTION_PROFILE, "counter": P.P4Ids.COUNTER,
          "direct_counter": P.P4Ids.DIRECT_COUNTER, "meter": P.P4Ids.METER,
          "direct_meter": P.P4Ids.DIRECT_METER, "register": P.P4Ids.REGISTER,
          "digest": P.P4Ids.DIGEST}


def jenkins_hash(name: str) -> int:
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class IdAllocator:
    def __init__(self) -> None:
        self.wanted: list[tuple[str, str, int | None]] = []
        self.ids: dict[tuple[str, str], int] = {}
        self.hash_names: dict[tuple[str, str], str] = {}

    def add(self, kind: str, name: str, annos: list[A.Annotation] | None = None,
            hash_name: str | None = None) -> None:
        if hash_name is not None:  # p4c hashes a controller header's type name, not its name
            self.hash_names[(kind, name)] = hash_name
        fixed = None
        a = A.anno(annos or [], "id")
        if a and a.args and isinstance(a.args[0], int):
            fixed = a.args[0]
            if fixed < (1 << 24):
                fixed |= PREFIX[kind] << 24
        self.wanted.append((kind, name, fixed))

    def assign(self) -> None:
        taken: set[int] = set()
        for kind, name, fixed in self.wanted:
            if fixed is not None:
                if fixed in taken:
                    raise CompileError(None, f"@id {fixed:#x} of {name} is already in use")
                taken.add(fixed)
                self.ids[(kind, name)] = fixed
        for kind, name, _ in sorted(w for w in self.wanted if w[2] is None):
            if (kind, name) in self.ids:
                continue
            v = jenkins_hash(self.hash_names.get((kind, name), name))
            while True:
                cand = (PREFIX[kind] << 24) | (v & 0xFFFFFF)
                if cand not in taken:
                    break
                v = (v + 1) & 0xFFFFFFFF
            taken.add(cand)
            self.ids[(kind, name)] = cand

    def __call__(self, kind: str, name: str) -> int:
        return self.ids[(kind, name)]


def aliases(names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    parts = {n: n.split(".") for n in names}
    for n, p in parts.items():
        for k in range(1, len(p) + 1):
            suffix = ".".join(p[-k:])
            clash = any(m != n and (m == suffix or m.endswith("." + suffix)) for m in names)
            if not clash:
                out[n] = suffix
                break
        else:
            out[n] = n
    return out

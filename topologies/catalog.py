"""Where topologies come from: a YAML file, a shipped name (a file beside this module), or a
generator spec such as ``fat-tree:k=4``."""

from __future__ import annotations

from pathlib import Path

from topologies.generators import SPEC_HELP, generate, is_spec
from topologies.model import Topology, TopologyError, load_topology

TOPO_DIR = Path(__file__).resolve().parent  # the shipped YAML files


def find_topology(name: str) -> Path:
    """A path, or the name of a file in topologies/ (with or without .yaml)."""
    path = Path(name)
    if path.exists():
        return path
    for candidate in (TOPO_DIR / name, TOPO_DIR / f"{name}.yaml"):
        if candidate.exists():
            return candidate
    known = ", ".join(sorted(p.stem for p in TOPO_DIR.glob("*.yaml")))
    raise TopologyError(f"{name}: no such topology file (shipped: {known}; or generate one: "
                        f"{SPEC_HELP})")


def locate_topology(name: str) -> Path | None:
    """The file a topology name stands for, or None for a generator spec (no file): the one
    place that decides how a name is read, for every command that takes one."""
    if is_spec(name) and not Path(name).exists():
        return None
    return find_topology(name)


def resolve_topology(name: str) -> Topology:
    """A topology file, a shipped name, or a generator spec such as ``fat-tree:k=4``."""
    path = locate_topology(name)
    return generate(name) if path is None else load_topology(path)

"""fabric.p4's counters as both drivers read them over P4Runtime (the emulation over gRPC,
the simulator in process): which ports to read, and the drop reasons and ECN marks at the end
of a run."""

from __future__ import annotations

from controlplane.channel import SwitchChannel, SwitchChannels
from controlplane.entities import CounterEntry
from controlplane.fabric_plan import C_DROPS, C_ECN_MARKS, DROP_REASONS
from topologies.model import Topology


def switch_ports(topo: Topology) -> dict[str, list[int]]:
    """Each switch's ports that have a link, in order."""
    return {sw: sorted(lk.a_port if lk.a == sw else lk.b_port for lk in topo.links_of(sw))
            for sw in topo.switches}


def drop_counters(channels: SwitchChannels, ports: dict[str, list[int]]) -> dict[str, dict[str, int]]:
    """Per switch: packets its program dropped, by reason (only reasons that occurred), and
    the ECN marks over all its ports."""
    def read(conn: SwitchChannel) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in conn.read(CounterEntry(counter=C_DROPS)):
            reason = DROP_REASONS.get(e.index)
            if reason and e.packets:
                out[reason] = e.packets
        marks = conn.read(*(CounterEntry(counter=C_ECN_MARKS, index=p)
                            for p in ports[conn.name]))
        out["ecn_marks"] = sum(e.packets for e in marks)
        return out

    return channels.run(read, "counter read")

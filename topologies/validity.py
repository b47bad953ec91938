"""Is a run's network behavior real, or the machine's CPU starving the switches?

A port whose queue is backlogged should dequeue at exactly its configured rate. If a switch
process cannot get enough CPU, two things show: its measured service rate while backlogged
falls below the configured rate, and the kernel drops frames on its receive sockets because it
reads too slowly. Either makes the run invalid; the runner says so loudly rather than reporting
starvation as congestion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIN_BUSY_SECONDS = 0.2  # too short a backlog gives no meaningful rate
SERVICE_TOLERANCE = 0.90  # measured/configured below this = the switch fell behind
RETX_PER_DROP = 3  # retransmissions one switch drop may explain (SACK, a timeout or two)
RETX_SLACK = 0.01  # plus this share of the cells sent (spurious resends under reordering)


def service_problems(stats: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> list[str]:
    """``stats``: switch -> port -> {"rate_pps", "busy_seconds", "busy_tx_packets",
    "rx_socket_drops"}. Returns one reason per port that shows starvation."""
    reasons: list[str] = []
    for switch, ports in sorted(stats.items()):
        for port, st in sorted(ports.items()):
            dropped = int(st.get("rx_socket_drops", 0))
            if dropped:
                reasons.append(f"{switch} port {port}: kernel dropped {dropped} frames the "
                               "switch did not read in time")
            rate = int(st.get("rate_pps", 0))
            busy = float(st.get("busy_seconds", 0.0))
            if rate and busy >= MIN_BUSY_SECONDS:
                measured = int(st.get("busy_tx_packets", 0)) / busy
                if measured < SERVICE_TOLERANCE * rate:
                    reasons.append(f"{switch} port {port}: served {measured:.0f} pps while "
                                   f"backlogged, configured {rate} pps")
    return reasons


def retransmission_totals(flows: Mapping[str, Mapping[str, Any]]) -> tuple[int, int | None]:
    """(cells retransmitted, cells sent; None if a sender did not say) over every flow."""
    retx = sum(int(f.get("retransmits") or 0) for f in flows.values())
    sent = [f.get("cells_sent") for f in flows.values()]
    return retx, (sum(int(s) for s in sent) if sent and None not in sent else None)


def queue_drops_measured(drops: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether every switch reported its queue (tail) drops; BMv2 has no such counter."""
    return bool(drops) and all("queue_drops" in d for d in drops.values())


def loss_problems(target: str, drops: Mapping[str, Mapping[str, Any]],
                  flows: Mapping[str, Mapping[str, Any]], link_failures: bool = False
                  ) -> list[str]:
    """Where the switches cannot count their queue drops (BMv2), the hosts' retransmissions are
    the only evidence of loss: any makes the drop figure unknown, and a switch that cannot keep
    up (drops frames, or delays and reorders them into spurious retransmissions) looks the same
    as congestion, so the run cannot be trusted."""
    retx, sent = retransmission_totals(flows)
    if not retx:
        return []
    share = f" ({100 * retx / sent:.1f}% of {sent} cells sent)" if sent else ""
    if queue_drops_measured(drops):
        if link_failures:
            return []  # cells lost on a failed link are no queue drops, and are resent
        # Each cell a switch dropped costs about one retransmission (SACK); many more than
        # that means cells were lost or delayed outside the switches' queues (a host or the
        # kernel fell behind) and the transport resent them.
        dropped = sum(int(d.get("queue_drops", 0)) for d in drops.values())
        if retx > RETX_PER_DROP * dropped + RETX_SLACK * (sent or 0):
            return [f"{retx} cells retransmitted{share} but the switches dropped only "
                    f"{dropped}: cells were lost or delayed outside the switch queues"]
        return []
    return [f"{retx} cells retransmitted{share} and the {target} switches count no queue drops: "
            "congestion loss cannot be told from a switch that did not keep up"]

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


def duplicate_totals(reorder: Mapping[str, Mapping[str, Any]]) -> int:
    """Cells the receivers got more than once, over every receiving host."""
    return sum(int(r.get("duplicates", 0)) for r in reorder.values())


def switch_drops(counters: Mapping[str, Any], stats: Mapping[str, Any] | None) -> dict[str, Any]:
    """A switch's drop figures: its program's counters, plus what the target itself counts.
    BMv2 has no stats (None) and no queue-drop counter: its figure stays unmeasured, never
    0. p4sim lists the ports it has seen traffic on; one that saw none (a switch no flow
    crossed) dropped nothing, measured."""
    drops = dict(counters)
    if stats is None:
        return drops
    ports = list(stats.get("ports", {}).values())
    if not ports or any("queue_drops" in v for v in ports):
        drops["queue_drops"] = sum(int(v.get("queue_drops", 0)) for v in ports)
    if not ports or any("rx_dropped_malformed" in v for v in ports):
        drops["malformed"] = sum(int(v.get("rx_dropped_malformed", 0)) for v in ports)
    return drops


def queue_drops_measured(drops: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether every switch reported its queue (tail) drops; BMv2 has no such counter."""
    return bool(drops) and all("queue_drops" in d for d in drops.values())


def no_cell_lost(retransmitted: int, duplicates: int) -> bool:
    """Whether the hosts prove that no cell was lost, with no switch counting its drops. A
    resent cell arrives twice (a duplicate at the receiver) exactly when neither copy was
    lost: a resend that fills a hole, or is lost itself, makes none. So each lost cell leaves
    one resend without a duplicate, and as many duplicates as resends leaves no room for one
    (early resends under reordering or queueing delay, which BMv2 on a busy CPU makes)."""
    return duplicates >= retransmitted


def loss_problems(target: str, drops: Mapping[str, Mapping[str, Any]],
                  flows: Mapping[str, Mapping[str, Any]], duplicates: int = 0) -> list[str]:
    """Where the switches cannot count their queue drops (BMv2), the hosts' retransmissions are
    the only evidence of loss: any makes the drop figure unknown, and a switch that cannot keep
    up (drops frames, or delays and reorders them into spurious retransmissions) looks the same
    as congestion, so the run cannot be trusted. ``duplicates``: cells the receivers got twice;
    as many as the resends prove that nothing was lost (``no_cell_lost``)."""
    retx, sent = retransmission_totals(flows)
    if not retx or no_cell_lost(retx, duplicates):
        return []
    share = f" ({100 * retx / sent:.1f}% of {sent} cells sent)" if sent else ""
    if queue_drops_measured(drops):
        # Where the switches count their drops (p4sim) and the kernel's socket drops are
        # checked per port (service_problems), a retransmission beyond the drops is the
        # transport resending early (an RTO or NAK under reordering or queueing delay): a
        # figure of the transport, printed in the summary, not evidence of a run that the
        # machine could not keep up with.
        return []
    return [f"{retx} cells retransmitted{share}, {duplicates} received twice, and the {target} "
            "switches count no queue drops: congestion loss cannot be told from a switch that "
            "did not keep up"]


OVER_RATE_TOLERANCE = 1.005  # counters are read a few ms apart from the window's edges


def over_rate_problems(directions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``directions``: the link accounting's per-direction figures (``offered`` = what the
    direction carried over the window as a fraction of its line). A link can carry more than
    its line only where the switch paces its priority queues each on its own (real BMv2, whose
    feedback queue may use the whole line beside the data share): then the emulated line rate
    was not kept, and the run's figures are not those of the configured fabric."""
    return [f"{label}: carried {100 * d['offered']:.1f}% of its line rate over the window "
            "(the switch's priority queues together exceeded the configured link rate)"
            for label, d in sorted(directions.items())
            if d.get("offered") is not None and d["offered"] > OVER_RATE_TOLERANCE]

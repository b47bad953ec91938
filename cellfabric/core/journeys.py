"""Journeys of sampled packets: every switch's trace records (RESULTS/traces/SWITCH.jsonl,
p4sim.switch.jsontrace) and the hosts' NIC records (hosts.jsonl) joined per packet.

A packet is known at every hop by its identity (IPv4 addresses, protocol, identification, L4
ports: fields no hop rewrites; cells carry the PSN's low 16 bits as identification). Each send
at a host NIC starts one journey (a retransmission starts another); the switch records of the
same identity that follow it, in time order, are its hops, and the first receive at a host
after the last hop ends it. The times telescope: the one-way latency measured from send to
receive is the host NIC's wait, the links' times and each switch's queue wait (plus the
switch's processing time, zero in virtual time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IdKey = tuple[Any, ...]
TRACES = "traces"


class TraceError(Exception):
    """A results folder without readable traces (one line, with the path)."""


def id_key(ident: dict[str, Any] | None) -> IdKey | None:
    if not ident:
        return None
    return (ident["src"], ident["dst"], ident["proto"], ident["sport"], ident["dport"],
            ident["ip_id"])


@dataclass
class Traces:
    index: dict[str, Any]
    sends: list[dict[str, Any]]
    recvs: dict[IdKey, list[dict[str, Any]]]
    hops: dict[IdKey, list[dict[str, Any]]]  # switch records by identity, by t_in
    switches: list[str] = field(default_factory=list)
    # switch -> the record fields its traces do not give (a real BMv2's log: bmv2log.LACKS)
    lacks: dict[str, list[str]] = field(default_factory=dict)


def _index_of(run_dir: Path) -> dict[str, Any]:
    """Hosts and links of an emulated run, from the topology its metrics.json names (the
    simulator writes traces/index.json itself)."""
    try:
        from topologies.catalog import resolve_topology

        name = json.loads((run_dir / "metrics.json").read_text())["run"]["topology"]
        topo = resolve_topology(name)
    except Exception:  # no metrics yet, or a topology file that moved: addresses only
        return {"hosts": {}}
    links = {f"{lk.a}:{lk.a_port}": f"{lk.b}:{lk.b_port}" for lk in topo.links}
    links |= {v: k for k, v in links.items()}
    return {"hosts": {n: h.ip for n, h in topo.hosts.items()}, "links": links}


def _switch_name(stem: str, known: set[str]) -> str:
    """A trace file's switch: its name, or (emulation) its Mininet node name, which is the
    switch's name and the run's 4-character tag."""
    if stem in known or not known:
        return stem
    return next((n for n in sorted(known, key=len, reverse=True)
                 if stem.startswith(n) and len(stem) == len(n) + 4), stem)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise TraceError(f"{path}:{n}: not a JSON record ({e.msg})") from None
    return out


def load_traces(run_dir: Path) -> Traces:
    tdir = run_dir / TRACES
    if not tdir.is_dir():
        raise TraceError(f"{run_dir}: no traces/ folder (run `cellfabric sim --trace-sample N`)")
    index_path = tdir / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else _index_of(run_dir)
    sends, recvs = [], {}
    hosts_path = tdir / "hosts.jsonl"
    for rec in _jsonl(hosts_path) if hosts_path.exists() else []:
        key = id_key(rec.get("id"))
        if key is None:
            continue
        if rec["ev"] == "send":
            sends.append(rec)
        else:
            recvs.setdefault(key, []).append(rec)
    hops: dict[IdKey, list[dict[str, Any]]] = {}
    switches = []
    known = set(index.get("tiers", {})) | {p.split(":")[0] for p in index.get("links", {})}
    for path in sorted(tdir.glob("*.jsonl")):
        if path.name == "hosts.jsonl":
            continue
        name = _switch_name(path.stem, known)
        switches.append(name)
        for rec in _jsonl(path):
            rec["switch"] = name  # a switch process knows only its device id
            key = id_key(rec.get("id"))
            if key is not None:
                hops.setdefault(key, []).append(rec)
    lacks = _read_bmv2_logs(tdir, known, hops, switches, index)
    for recs in hops.values():
        recs.sort(key=lambda r: r["t_in"])
    sends.sort(key=lambda r: r["t"])
    return Traces(index, sends, recvs, hops, switches, lacks)


def _read_bmv2_logs(tdir: Path, known: set[str], hops: dict[IdKey, list[dict[str, Any]]],
                    switches: list[str], index: dict[str, Any]) -> dict[str, list[str]]:
    """A real BMv2 run's switch logs (cellfabric.core.bmv2log) as records; returns what
    fields each such switch's records lack."""
    from cellfabric.core.bmv2log import LACKS, LOG_NAME, bmv2_logs, read_log

    lacks: dict[str, list[str]] = {}
    for stem, path in bmv2_logs(tdir).items():
        name = _switch_name(stem, known)
        switches.append(name)
        lacks[name] = list(LACKS)
        m = LOG_NAME.match(path.name)
        index.setdefault("sample_every", int(m.group("every")) if m else "?")
        index["clock"] = "BMv2's log: ns of the day, 1 ms resolution"
        try:
            recs = read_log(path, name)
        except OSError as e:
            raise TraceError(f"{path}: unreadable ({e.strerror})") from None
        for rec in recs:
            key = id_key(rec.get("id"))
            if key is not None:
                hops.setdefault(key, []).append(rec)
    return lacks


def _named(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events a reader follows: tables, selector choices, named actions, errors (not the
    compiler's anonymous act_N / node_N steps)."""
    return [ev for ev in events if ev["ev"] in ("table", "choice", "error")
            or (ev["ev"] == "action" and not ev["name"].startswith(("act_", "NoAction")))]


def _hop(rec: dict[str, Any], prev_out: int, links: dict[str, str]) -> dict[str, Any]:
    copy = next((c for c in rec["copies"] if "t_out" in c), None)
    dropped = next((c for c in rec["copies"] if c.get("dropped")), None)
    used = copy or dropped or {}
    hop: dict[str, Any] = {
        "switch": rec["switch"], "in_port": rec["in_port"], "t_in": rec["t_in"],
        "link_in_ns": rec["t_in"] - prev_out, "out_port": used.get("port"),
        "depth": used.get("depth"), "queue_wait_ns": used.get("wait_ns", 0),
        "t_out": used.get("t_out"), "changes": used.get("changes", {}),
        "decisions": _named(rec["ingress"]) + _named(used.get("egress", [])),
        "peer": links.get(f"{rec['switch']}:{used.get('port')}"),
    }
    if copy is not None:
        hop["processing_ns"] = copy["t_out"] - rec["t_in"] - copy.get("wait_ns", 0)
    if "drop" in rec:
        hop["drop"] = rec["drop"]
    return hop


def journey_of(tr: Traces, send: dict[str, Any], next_send_t: int | None) -> dict[str, Any]:
    """One packet's journey from its send record (see the module docstring)."""
    key = id_key(send["id"])
    assert key is not None
    links = tr.index.get("links", {})
    names = {ip: name for name, ip in tr.index.get("hosts", {}).items()}
    recs = [r for r in tr.hops.get(key, ()) if r["t_in"] >= send["t"]
            and (next_send_t is None or r["t_in"] < next_send_t)]
    j: dict[str, Any] = {"src": send["host"], "dst": names.get(send["id"]["dst"]),
                         "id": send["id"], "cell": send.get("cell"), "t_send": send["t"],
                         "nic_wait_ns": send.get("t_tx", send["t"]) - send["t"], "hops": []}
    prev_out = _walk_hops(j, recs, send.get("t_tx", send["t"]), links)
    if "dropped" in j:
        return j
    recv = next((r for r in tr.recvs.get(key, ()) if r["t"] >= prev_out), None)
    if recv is None:
        last = j["hops"][-1] if j["hops"] else None
        j["lost"] = (f"after {last['switch']} port {last['out_port']} (link down, or the run "
                     "ended first)" if last else "before the first switch")
        return j
    j["t_recv"] = recv["t"]
    j["link_out_ns"] = recv["t"] - prev_out
    j["one_way_ns"] = recv["t"] - send["t"]
    j["ecn_at_receiver"] = (recv.get("cell") or {}).get("ecn")
    parts = {"nic_wait_ns": j["nic_wait_ns"],
             "links_ns": sum(h["link_in_ns"] for h in j["hops"]) + j["link_out_ns"],
             "queue_waits_ns": sum(h["queue_wait_ns"] for h in j["hops"]),
             "processing_ns": sum(h.get("processing_ns", 0) for h in j["hops"])}
    parts["sum_ns"] = sum(parts.values())
    j["breakdown"] = parts
    return j


def _walk_hops(j: dict[str, Any], recs: list[dict[str, Any]], prev_out: int,
               links: dict[str, Any]) -> int:
    """Append each switch record's hop to journey ``j``, each timed from the one before it
    left (``prev_out``); stops at a drop, noted in ``j["dropped"]``. Returns when the last
    hop's copy left."""
    for rec in recs:
        hop = _hop(rec, prev_out, links)
        j["hops"].append(hop)
        if "drop" in hop or hop["t_out"] is None:
            j["dropped"] = {"switch": hop["switch"], **hop.get("drop", {
                "reason": "no copy left the switch"})}
            return prev_out
        prev_out = hop["t_out"]
    return prev_out


def switch_journeys(tr: Traces, src_ip: str | None, dst_ip: str | None,
                    psn: int | None) -> list[dict[str, Any]]:
    """Without host records (an emulated run: the hosts are processes of their own), each
    sampled packet's hops from the first switch to the last: link times between switches and
    queue waits, spanning its first arrival to its last departure (its one-way latency less
    the two host links, which no switch sees)."""
    links = tr.index.get("links", {})
    names = {ip: name for name, ip in tr.index.get("hosts", {}).items()}
    out = []
    for key, all_recs in tr.hops.items():
        src, dst, _, _, _, ip_id = key
        if (src_ip and src != src_ip) or (dst_ip and dst != dst_ip) \
                or (psn is not None and ip_id != psn & 0xFFFF):
            continue
        for recs in _paths(all_recs, links):
            j: dict[str, Any] = {"src": names.get(src, src), "dst": names.get(dst, dst),
                                 "id": recs[0]["id"], "cell": {"psn_low16": ip_id},
                                 "t_send": recs[0]["t_in"], "nic_wait_ns": 0, "hops": []}
            prev_out = _walk_hops(j, recs, recs[0]["t_in"], links)
            if "dropped" not in j:
                j["span_ns"] = prev_out - recs[0]["t_in"]
                j["breakdown"] = {
                    "links_ns": sum(h["link_in_ns"] for h in j["hops"]),
                    "queue_waits_ns": sum(h["queue_wait_ns"] for h in j["hops"]),
                    "processing_ns": sum(h.get("processing_ns", 0) for h in j["hops"])}
            out.append(j)
    return sorted(out, key=lambda j: j["t_send"])


def _paths(recs: list[dict[str, Any]], links: dict[str, str]) -> list[list[dict[str, Any]]]:
    """One identity's switch records (by time) split into the paths of its transmissions:
    each from the earliest record not yet on a path, then on to the record at the far end
    of the link its copy left by, arriving no earlier. A retransmitted cell has the same
    identity, and its records interleave with the first copy's when they overlap in time."""
    if not links:  # no topology to follow: the records as one journey
        return [recs]
    unused, paths = list(recs), []
    while unused:
        path = [_first_hop(unused, links)]
        unused.remove(path[0])
        while True:
            copy = next((c for c in path[-1]["copies"] if "t_out" in c), None)
            peer = links.get(f"{path[-1]['switch']}:{copy['port']}") if copy else None
            if peer is None:
                break
            switch, _, port = peer.partition(":")
            nxt = next((r for r in unused if r["switch"] == switch
                        and str(r["in_port"]) == port and r["t_in"] >= copy["t_out"]), None)
            if nxt is None:
                break
            unused.remove(nxt)
            path.append(nxt)
        paths.append(path)
    return paths


def _first_hop(unused: list[dict[str, Any]], links: dict[str, str]) -> dict[str, Any]:
    """The earliest record no other unused record's copy could have led to. Times from
    real BMv2 logs are whole milliseconds, so a cell's hops across a fabric often tie; the
    records' order then says nothing about which switch saw it first."""
    def fed(rec: dict[str, Any]) -> bool:
        into = f"{rec['switch']}:{rec['in_port']}"
        return any(links.get(f"{u['switch']}:{c['port']}") == into and c["t_out"] <= rec["t_in"]
                   for u in unused if u is not rec
                   for c in u["copies"] if "t_out" in c)
    return next((r for r in unused if not fed(r)), unused[0])


def journeys(tr: Traces, src: str | None = None, dst: str | None = None,
             psn: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Journeys of the sampled packets sent by ``src`` to ``dst`` (host names or addresses;
    None: any), data cells of PSN ``psn`` only if given, in send order."""
    ips = dict(tr.index.get("hosts", {}))
    for name in (src, dst):
        if name is not None and name not in ips:
            if name.count(".") == 3:  # an address stands for itself
                ips[name] = name
                continue
            known = ", ".join(sorted(ips)) or "none"
            raise TraceError(f"unknown host '{name}' (hosts in this run: {known})")
    if not tr.sends:
        found = switch_journeys(tr, ips.get(src or ""), ips.get(dst or ""), psn)
        return found[:limit] if limit else found
    by_key: dict[IdKey, list[dict[str, Any]]] = {}
    for s in tr.sends:
        by_key.setdefault(id_key(s["id"]), []).append(s)  # type: ignore[arg-type]
    out = []
    for s in tr.sends:
        if src is not None and s["host"] != src:
            continue
        if dst is not None and s["id"]["dst"] != ips[dst]:
            continue
        if psn is not None and (s.get("cell") or {}).get("psn") != psn:
            continue
        same = by_key[id_key(s["id"])]  # type: ignore[index]
        later = [x["t"] for x in same if x["t"] > s["t"]]
        out.append(journey_of(tr, s, min(later) if later else None))
        if limit is not None and len(out) >= limit:
            break
    return out


def dropped_journeys(tr: Traces) -> list[dict[str, Any]]:
    """Every sampled packet that a switch dropped, whether or not a host sent it."""
    out = []
    for recs in tr.hops.values():
        for rec in recs:
            if "drop" in rec:
                out.append({"switch": rec["switch"], "t": rec["drop"].get("t", rec["t_in"]),
                            "id": rec["id"], **rec["drop"]})
    return sorted(out, key=lambda d: d["t"])


def describe_decision(ev: dict[str, Any]) -> str:
    """One table, selector choice or action as a short phrase."""
    kind = ev["ev"]
    short = lambda name: name.rsplit(".", 1)[-1]  # noqa: E731
    if kind == "table":
        return (f"{short(ev['table'])} hit -> {ev.get('action', '?')}" if ev["hit"]
                else f"{short(ev['table'])} miss")
    if kind == "choice":
        options = [f"{short(m['action'] or '?')}({', '.join(map(str, m['args']))})"
                   + ("" if m.get("live", True) else " down") for m in ev["members"]]
        chosen = ev.get("chosen")
        picked = options[chosen] if chosen is not None else "none"
        return f"{short(ev['table'])} group {ev['group']}: chose {picked} of [{', '.join(options)}]"
    if kind == "action":
        return f"{short(ev['name'])}({', '.join(map(str, ev['args']))})"
    return ev.get("msg", kind)

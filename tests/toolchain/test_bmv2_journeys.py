"""`cellfabric run --target bmv2 --trace-sample 1` on real simple_switch_grpc: the journeys
come from BMv2's own logs (cellfabric.core.bmv2log) and the page names what BMv2 did not give.

Needs root (Mininet), Mininet, and the real toolchain on PATH (`make test-toolchain`)."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from bmv2_under_mininet import NEEDS  # skips this module without Mininet

pytestmark = NEEDS

from cellfabric.core.journeys import journeys, load_traces  # noqa: E402
from topologies.catalog import resolve_topology  # noqa: E402


@pytest.fixture(scope="module")
def bmv2_traced_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("bmv2-traces")
    # 8 KiB per flow: 8 data cells of 1 KiB per host pair, a few dozen packets per switch.
    proc = subprocess.run(
        [sys.executable, "-m", "cellfabric.cli", "run", "leaf-spine", "--target", "bmv2",
         "--size", "8192", "--count", "1", "--trace-sample", "1", "--results", str(results)],
        capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "CELLFABRIC_TRACE_SAMPLE"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    return run_dir


def test_a_cell_has_every_hop_from_bmv2_records(bmv2_traced_run: Path) -> None:
    topo = resolve_topology("leaf-spine")
    tr = load_traces(bmv2_traced_run)
    assert set(tr.lacks) == set(topo.switches), tr.lacks  # every switch's records: BMv2's
    cross = [(a, b) for a in topo.hosts for b in topo.hosts
             if topo.hosts[a].leaves[0] != topo.hosts[b].leaves[0]]
    assert cross
    found = {(a, b): js for a, b in cross if (js := journeys(tr, a, b))}
    assert found, "no journey between hosts on different leaves"
    # A cell BMv2 lost (a slow switch: the run retransmits it) has a partial journey; the
    # others, each flow's first among them, have all their hops.
    whole = [j for js in found.values() for j in js
             if j["hops"] and (j["hops"][-1]["peer"] or "").split(":")[0] == j["dst"]]
    assert all(js[0] in whole for js in found.values()), found
    assert len(whole) >= 0.9 * sum(map(len, found.values()))
    for j in whole:
        src_leaf = topo.hosts[j["src"]].leaves[0]
        dst_leaf = topo.hosts[j["dst"]].leaves[0]
        hops = j["hops"]
        assert "dropped" not in j and len(hops) == 3, j
        assert [h["switch"] for h in hops][::2] == [src_leaf, dst_leaf], j
        assert topo.switches[hops[1]["switch"]].tier == 2  # the middle hop: a spine
        for here, there in pairwise(hops):  # each hop leaves by the link the next took
            assert here["peer"] == f"{there['switch']}:{there['in_port']}", (here, there)
        assert all(h["t_out"] is not None and h["depth"] is None for h in hops)
        assert hops[0]["changes"].get("ttl") == [64, 63]  # one hop each: the router's TTL
        chosen = [d for h in hops for d in h["decisions"] if d["ev"] == "choice"]
        assert chosen and all(d["chosen"] is not None for d in chosen)


def test_the_page_names_the_fields_bmv2_did_not_give(bmv2_traced_run: Path) -> None:
    page = (bmv2_traced_run / "report.html").read_text()
    assert 'id="missing-fields"' in page
    section = page.split('id="missing-fields"', 1)[1].split("</div>", 1)[0]
    for missing in ("depth", "drop.code", "choice.live", "times finer than 1 ms"):
        assert missing in section
    for switch in resolve_topology("leaf-spine").switches:
        assert switch in section

"""One packet path: the same packets give the same bytes and the same metadata whichever way
they cross the switch.

The program copies every standard_metadata field INT exposes (ports, timestamps, queue depths,
queue delay, queue id, packet length, instance type, replication id) into the packet in egress,
so comparing emitted frames compares every byte and every such field. The ways compared: straight
through (unlimited queue), through a packet-paced queue that never fills, through a bit-rate
port that is always idle by the next arrival, stage by stage instead of the fused receive, and a
multicast replica beside a plain unicast. Time is virtual (it advances only between packets), as
in the simulator, so none of these may change any figure.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bmv2json"))

from jsonkit import Prog, assign, ex, f, hx

from p4sim.switch import stages
from p4sim.switch.api import Replica
from p4sim.switch.dataplane import DataPlane

STD = "standard_metadata"
EXPOSED = [  # (probe field, standard_metadata field, width)
    ("ip", "ingress_port", 16), ("ep", "egress_port", 16), ("it", "instance_type", 32),
    ("len", "packet_length", 32), ("enq_ts", "enq_timestamp", 32), ("enq_qd", "enq_qdepth", 32),
    ("td", "deq_timedelta", 32), ("deq_qd", "deq_qdepth", 32),
    ("igts", "ingress_global_timestamp", 48), ("egts", "egress_global_timestamp", 48),
    ("rid", "egress_rid", 16), ("k", "egress_spec", 16),
]
US = 1000


def probe_prog(mcast: bool = False) -> Prog:
    p = Prog([(name, width) for name, _, width in EXPOSED])
    fwd = p.action("fwd", [], [assign(f(STD, "mcast_grp" if mcast else "egress_spec"),
                                      hx(7 if mcast else 1))])
    p.table("t", [], [fwd], default=(fwd, []))
    report = p.action("report", [], [assign(f("probe", name), f(STD, std))
                                     for name, std, _ in EXPOSED if name != "k"])
    p.table("rep", [], [report], default=(report, []), pipe="egress")
    return p


class Run:
    """A data plane on a virtual clock; ``send`` delivers frames at given microseconds and
    polls every deadline in between (departures before arrivals at equal times)."""

    def __init__(self, p: Prog, setup: Callable[[DataPlane], None], fuse: bool = True,
                 clock: Callable[[], int] | None = None) -> None:
        self.now = 5_000_000  # the switch starts here: timestamps count from it
        self.out: list[tuple[int, int, bytes]] = []  # (time ns, port, frame)
        self.dp = DataPlane(clock=clock or (lambda: self.now),
                            transmit=lambda port, fr: self.out.append((self.now, port, fr)))
        self.dp.load_pipeline(p.json())
        if not fuse:  # the stage-by-stage functions instead of the fused receive
            flow = self.dp.flow
            assert flow is not None
            flow.receive = flow.stages_unfused()["receive"]
        setup(self.dp)

    def send(self, frames: list[tuple[int, bytes]]) -> list[tuple[int, int, bytes]]:
        for at_us, frame in frames:
            self.until(5_000_000 + at_us * US)
            self.dp.receive(0, frame)
            self.until(self.now)
        self.until(None)
        return self.out

    def until(self, t: int | None) -> None:
        while (d := self.dp.poll()) is not None and (t is None or d <= t):
            self.now = d
        if t is not None:
            self.now = t


def traffic(p: Prog) -> list[tuple[int, bytes]]:
    """Forty frames of assorted sizes, 20 us apart (far slower than any port below)."""
    return [(20 * i, p.frame(0) + bytes(range(i % 7 * 30))) for i in range(40)]


def unlimited(dp: DataPlane) -> None:
    pass


def paced(dp: DataPlane) -> None:
    dp.set_queue_rate(100_000, 1)  # one packet per 10 us: every packet finds an empty queue
    dp.set_queue_depth(4, 1)


def bit_rate(dp: DataPlane) -> None:
    dp.set_link_rate(10_000_000_000, 64_000, 1)  # 10 Gb/s: under 0.3 us per frame here


@pytest.mark.parametrize("setup", [paced, bit_rate])
def test_queueing_and_pacing_change_no_byte_and_no_metadata(setup: Callable) -> None:
    p = probe_prog()
    ref = Run(p, unlimited).send(traffic(p))
    got = Run(p, setup).send(traffic(p))
    assert len(ref) == 40
    assert got == ref
    fields = [p.fields(fr) for _, _, fr in ref]
    # The figures themselves: no queueing, zero hop latency in virtual time, right lengths.
    assert all(x["egts"] == x["igts"] == x["enq_ts"] and x["td"] == x["enq_qd"] == 0
               and x["deq_qd"] == 0 and x["ep"] == 1 for x in fields)
    assert [x["igts"] for x in fields] == [20 * i for i in range(40)]
    assert [x["len"] for x in fields] == [len(fr) for _, fr in traffic(p)]


def test_fused_receive_equals_the_stages_one_by_one() -> None:
    p = probe_prog()
    for setup in (unlimited, paced, bit_rate):
        assert Run(p, setup, fuse=False).send(traffic(p)) == Run(p, setup).send(traffic(p))
    # Under load too: a paced port offered more than it serves builds a real queue.
    burst = [(0, fr) for _, fr in traffic(p)]
    fused, staged = Run(p, paced).send(burst), Run(p, paced, fuse=False).send(burst)
    assert fused == staged
    assert [p.fields(fr)["enq_qd"] for _, _, fr in fused] == [0, 0, 1, 2, 3]


def test_a_replica_and_a_unicast_through_the_same_idle_queue_agree() -> None:
    """The drift this guards against: the old fast path stamped egress_global_timestamp with
    the ingress time (hop latency 0) while replicas read the clock at egress. With a clock that
    moves on every read, both must now read it at the same points."""
    ticks = [0]

    def ticking() -> int:
        ticks[0] += 1
        return 5_000_000 + ticks[0] * US

    def group(dp: DataPlane) -> None:
        dp.mcast_group_set(7, [Replica(1, 3)])

    uni = Run(probe_prog(), unlimited, clock=ticking).send([(0, probe_prog().frame(0))])
    ticks[0] = 0
    rep = Run(probe_prog(mcast=True), group, clock=ticking).send([(0, probe_prog().frame(0))])
    u, r = probe_prog().fields(uni[0][2]), probe_prog().fields(rep[0][2])
    assert (r["it"], r["rid"]) == (5, 3) and (u["it"], u["rid"]) == (0, 0)
    for name in ("igts", "enq_ts", "egts", "td", "enq_qd", "deq_qd", "ep", "len"):
        assert u[name] == r[name], name
    assert u["egts"] - u["igts"] > 0  # the ticking clock did move between ingress and egress


def test_a_failure_in_the_fused_path_shows_the_lines_it_ran() -> None:
    """The fused receive keeps stages.py's own lines and the generated action registers its
    source, so a traceback through both shows each line's text (what pdb shows too)."""
    p = Prog([("a", 8), ("b", 8)])
    fwd = p.action("fwd", [], [assign(f(STD, "egress_spec"), hx(1))])
    p.table("t", [], [fwd], default=(fwd, []))
    divide = p.action("divide", [], [assign(f("probe", "a"), ex("/", f("probe", "a"),
                                                                f("probe", "b")))])
    p.table("div", [], [divide], default=(divide, []), pipe="egress")
    dp = DataPlane(clock=lambda: 0)
    dp.load_pipeline(p.json())
    assert dp.flow is not None
    failures: list[BaseException] = []
    receive = stages.build({**dp.flow._bindings(), "abort": failures.append})["receive"]
    receive(0, p.frame(6, 0))  # b = 0: the egress action divides by zero
    assert len(failures) == 1 and isinstance(failures[0], ZeroDivisionError)
    frames = traceback.extract_tb(failures[0].__traceback__)
    where = [(Path(fr.filename).name, fr.name, fr.line) for fr in frames]
    assert ("stages.py", "receive", "egress_pipe(P, F)") in where  # egress's line, inlined
    action = [fr for fr in frames if fr.filename.startswith("p4sim-generated/action_")]
    assert action and "//" in (action[-1].line or "")


def test_a_program_loaded_again_names_its_generated_code_once_and_keeps_its_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a program a second time (another switch of a fabric) reuses each generated
    function's code, file name and source lines: nothing is named again; and the lines are
    registered again if linecache was cleared meanwhile."""
    import linecache

    from p4sim.switch import codegen

    p = Prog([("a", 8), ("b", 8)])
    divide = p.action("divide_again", [], [assign(f("probe", "a"), ex("/", f("probe", "a"),
                                                                      f("probe", "b")))])
    p.table("t", [], [divide], default=(divide, []))
    named: list[str] = []
    real = codegen.generated_filename

    def counted(where: str, text: str) -> str:
        named.append(where)
        return real(where, text)

    monkeypatch.setattr(codegen, "generated_filename", counted)
    # the Python path: a second switch on the native path would not build this code at all
    DataPlane(clock=lambda: 0, dataplane="python").load_pipeline(p.json())
    first = list(named)
    assert any("divide_again" in w for w in first)
    linecache.clearcache()
    again = DataPlane(clock=lambda: 0, dataplane="python")
    again.load_pipeline(p.json())
    assert named == first  # the second load named nothing
    files = [n for n in linecache.cache if "divide_again" in n]
    assert files and any("//" in line for line in linecache.getlines(files[0]))

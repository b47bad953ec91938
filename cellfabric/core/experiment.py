"""One experiment, whichever driver runs it: the emulation (Mininet, processes, wall-clock
time) and the simulator (one process, virtual time) are two implementations of ``Driver``,
and ``run_experiment`` takes either through the same stages in the same order."""

from __future__ import annotations

from typing import Any, Protocol

from cellfabric.core.report import RunMetrics
from cellfabric.core.workloads import Workload
from topologies.model import Topology


class Driver(Protocol):
    def bring_up(self) -> None:
        """Compile the program, start the switches and hosts, program every switch."""

    def start_workload(self) -> None:
        """Counters before the traffic, the sampler, the collector, the failure timers."""

    def run_step(self, index: int) -> bool:
        """Run the workload's step ``index`` to its end; False if the run stopped early."""

    def finish_workload(self) -> None:
        """Stop the sampler, the collector and the timers (also after a failed step)."""

    def collect(self) -> RunMetrics:
        """Every figure of the run, in the metric model both drivers share."""

    def tear_down(self) -> None:
        """Stop and release whatever ``bring_up`` started, even after a failure."""


def run_experiment(driver: Driver, steps: int) -> RunMetrics:
    """Bring up, run every step, collect; always tears down what was brought up."""
    try:
        driver.bring_up()
        driver.start_workload()
        try:
            for index in range(steps):
                if not driver.run_step(index):
                    break
        finally:
            driver.finish_workload()
        return driver.collect()
    finally:
        driver.tear_down()


def run_header(name: str, topo: Topology, target: str, workload: Workload, cc: str,
               events: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The ``run`` section of metrics.json that both drivers write: what ran, on what."""
    return {"name": name, "topology": topo.name, "target": target, "workload": workload.name,
            "cc": cc, "spray": topo.fabric.spray, "cell_size": topo.fabric.cell_size,
            "events": events, "load": workload.load or None, **extra}

"""The collective library: schedules of sends per channel, their algorithms, a symbolic
executor that checks every rank's result, nccl-tests' bandwidth figures, and the lowering
of a schedule into the harness's workloads (Steps of Transfers)."""

from cellfabric.collectives.registry import ALGORITHMS, Algorithm, build
from cellfabric.collectives.schedule import (
    CollectiveSpec,
    Schedule,
    ScheduleError,
    Send,
)
from cellfabric.collectives.verify import check, verify

__all__ = ["ALGORITHMS", "Algorithm", "CollectiveSpec", "Schedule", "ScheduleError", "Send",
           "build", "check", "verify"]

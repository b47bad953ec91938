"""A process that draws a run's PNG plots beside the parent.

``cellfabric sim`` starts one before the simulation, so that importing matplotlib (about a
second) overlaps the simulation on the otherwise idle second core; the report then hands it
what the plots read and writes metrics.json while it draws. The worker is spawned, never
forked: by then the parent has threads and native libraries a fork would copy half-held.

It exits when its pipe closes (the parent closed it, or the parent died) and is a daemon, so
no worker outlives the run.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import traceback
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from cellfabric.core.report import RunMetrics

# Set to "0" to draw the plots in the parent process, as every caller without a worker does.
ENV_DISABLE = "CELLFABRIC_PLOT_WORKER"
JOIN_S = 2.0  # an idle worker exits at once on EOF; this only bounds a stuck one


def worker_enabled() -> bool:
    return os.environ.get(ENV_DISABLE, "1").strip().lower() not in ("0", "no", "false", "off")


def plot_inputs(m: RunMetrics) -> RunMetrics:
    """The sections write_plots reads, no more: the per-link samples, drops, telemetry and
    the summary stay in the parent (pickling the whole k=8 RunMetrics costs as much as the
    sections the plots use, for nothing)."""
    run = {"t0": m.run["t0"]} if "t0" in m.run else {}
    return RunMetrics(run=run, queues=m.queues, flows=m.flows, reorder=m.reorder,
                      link_load=m.link_load,
                      messages=[{"fct_s": msg.get("fct_s")} for msg in m.messages])


class PlotWorkerError(RuntimeError):
    """The worker failed in a way that has no exception of its own to re-raise."""


class PlotWorker:
    """One run's plots, drawn in a spawned process: ``submit`` then ``wait``; ``close``
    (also as a context manager) always leaves no process behind."""

    def __init__(self) -> None:
        self._pending = False
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True,
                                 name="cellfabric-plots")
        self._proc.start()
        child.close()  # only the worker holds its end: its EOF is the parent's close or death

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def submit(self, m: RunMetrics, out_dir: Path) -> None:
        data = pickle.dumps((plot_inputs(m), out_dir), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._conn.send_bytes(data)
        except OSError:  # its end closed: it died (its import failed, or it was killed)
            raise self._died() from None
        self._pending = True

    def wait(self) -> list[Path]:
        """The PNGs written; re-raises the worker's exception as write_plots raised it."""
        if not self._pending:
            raise PlotWorkerError("plot worker: nothing submitted")
        self._pending = False
        # the process sentinel as well as the pipe: a worker killed mid-draw sends nothing
        ready = wait([self._conn, self._proc.sentinel])
        if self._conn not in ready and not self._conn.poll():
            raise self._died()
        try:
            status, value = self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        # one run per worker: closing the pipe now lets it exit while the parent writes
        # report.html, and close() then only reaps it
        self._conn.close()
        if status == "ok":
            return value
        if isinstance(value, BaseException):
            raise value
        raise PlotWorkerError(value)

    def _died(self) -> PlotWorkerError:
        self._pending = False
        self._proc.join(JOIN_S)
        return PlotWorkerError(f"plot worker exited (code {self._proc.exitcode}) "
                               "before the plots were written")

    def close(self) -> None:
        """Close the pipe (the worker's signal to exit) and reap the worker; a worker still
        drawing (an exception left its work unwanted) is terminated, not waited for."""
        self._conn.close()
        if self._proc.pid is None:
            return
        self._proc.join(0.0 if self._pending else JOIN_S)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(JOIN_S)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._pending = False

    def __enter__(self) -> PlotWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_plot_worker() -> PlotWorker | None:
    """A worker, or None when the environment turns it off or no process can be started
    (the plots are then drawn in the parent, as they were before the worker)."""
    if not worker_enabled():
        return None
    try:
        return PlotWorker()
    except OSError:  # no process to spare (ulimit, memory): slower, never a failed run
        return None


def _serve(conn: Connection) -> None:
    """The worker: import the plotting code now, then draw each run sent until EOF."""
    # Ctrl-C reaches the whole process group: the parent handles it and closes the pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # what write_plots would import at its first figure, imported while the parent simulates
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401

    from cellfabric.core.plots import write_plots

    while True:
        try:
            m, out_dir = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", write_plots(m, out_dir))
        except Exception as exc:
            reply = ("error", _portable(exc))
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return


def _portable(exc: Exception) -> Exception | str:
    """The exception itself if it survives pickling (the parent re-raises it as the
    in-process path would), else a one-line description of it."""
    tb = "".join(traceback.format_exception(exc)).rstrip()
    try:
        copy = pickle.loads(pickle.dumps(exc))
    except Exception:
        return f"plot worker: {type(exc).__name__}: {exc}"
    copy.add_note(f"(raised in the plot worker)\n{tb}")
    return copy

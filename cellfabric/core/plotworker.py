"""A process that draws a run's PNG plots beside the parent.

``cellfabric sim`` starts one before the simulation, so that importing matplotlib (about a
second) overlaps the simulation on the otherwise idle second core; the report then hands it
what the plots read and writes metrics.json while it draws. The worker is spawned, never
forked: by then the parent has threads and native libraries a fork would copy half-held.

The figures are shared between two processes (SHARES): the queue-depth heatmap, about 60% of
the drawing at k=8, in one; the link loads, the completion-time CDF and the reorder depths in
the other, so the report waits for the larger share only. Each exits when its pipe closes (the parent closed it, or the parent died) and is
a daemon, so no worker outlives the run.
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

from cellfabric.core.plots import FIGURES
from cellfabric.core.report import RunMetrics

# Set to "0" to draw the plots in the parent process, as every caller without a worker does.
ENV_DISABLE = "CELLFABRIC_PLOT_WORKER"
WORKER_NICE = 10  # added to the workers' niceness (the parent keeps its own)
JOIN_S = 2.0  # an idle worker exits at once on EOF; this only bounds a stuck one
# the figures (plots.FIGURES) each process draws; None: every one no other share names. The
# share with the first figure comes first: its error is the one the in-process path raises
# when both shares fail (rarely only; either way the run fails).
SHARES: tuple[tuple[str, ...] | None, ...] = (None, ("queue_depth.png",))


def worker_enabled() -> bool:
    return os.environ.get(ENV_DISABLE, "1").strip().lower() not in ("0", "no", "false", "off")


# what each figure reads of RunMetrics, besides run["t0"] (write_plots: every figure's
# accounting comes from link_load, so every share gets it)
FIGURE_SECTIONS = {"link_load.png": (), "queue_depth.png": ("queues",),
                   "flow_rates.png": ("flows",), "completion_times.png": ("messages",),
                   "reorder_depth.png": ("reorder",)}


def plot_inputs(m: RunMetrics, only: tuple[str, ...] | None = None) -> RunMetrics:
    """The sections write_plots reads for the figures ``only`` (None: all), no more: the
    per-link samples, drops, telemetry and the summary stay in the parent, and the queue
    samples (a k=8 run's largest section to unpickle) go only to the share that draws them."""
    wanted = {sec for fig in (FIGURES if only is None else only)
              for sec in FIGURE_SECTIONS[fig]}
    run = {"t0": m.run["t0"]} if "t0" in m.run else {}
    return RunMetrics(
        run=run, link_load=m.link_load,
        queues=m.queues if "queues" in wanted else {},
        flows=m.flows if "flows" in wanted else {},
        reorder=m.reorder if "reorder" in wanted else {},
        messages=[{"fct_s": msg.get("fct_s")} for msg in m.messages] if "messages" in wanted
        else [])


class PlotWorkerError(RuntimeError):
    """The worker failed in a way that has no exception of its own to re-raise."""


class PlotWorker:
    """One run's plots, drawn in spawned processes (one per share of SHARES): ``submit``
    then ``wait``; ``close`` (also as a context manager) always leaves no process behind."""

    def __init__(self, shares: tuple[tuple[str, ...] | None, ...] = SHARES) -> None:
        self._pending = False
        self._shares = shares
        ctx = multiprocessing.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        try:
            for _ in shares:
                conn, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(child,), daemon=True,
                                   name="cellfabric-plots")
                self._conns.append(conn)
                self._procs.append(proc)
                proc.start()
                child.close()  # only the worker holds its end: its EOF is our close or death
        except OSError:
            self.close()
            raise

    @property
    def pid(self) -> int | None:
        """The first process's (the others' in ``pids``)."""
        return self._procs[0].pid

    @property
    def pids(self) -> list[int | None]:
        return [p.pid for p in self._procs]

    def submit(self, m: RunMetrics, out_dir: Path) -> None:
        named = {f for share in self._shares if share for f in share}
        try:
            for conn, share in zip(self._conns, self._shares, strict=True):
                only = share if share is not None else tuple(
                    f for f in FIGURES if f not in named)
                conn.send_bytes(pickle.dumps((plot_inputs(m, only), out_dir, only),
                                             protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:  # its end closed: it died (its import failed, or it was killed)
            raise self._died() from None
        self._pending = True

    def wait(self) -> list[Path]:
        """The PNGs written (in FIGURES order); re-raises a worker's exception as write_plots
        raised it."""
        if not self._pending:
            raise PlotWorkerError("plot worker: nothing submitted")
        self._pending = False
        replies = []
        for conn, proc in zip(self._conns, self._procs, strict=True):
            # the process sentinel as well as the pipe: a worker killed mid-draw sends nothing
            ready = wait([conn, proc.sentinel])
            if conn not in ready and not conn.poll():
                raise self._died()
            try:
                replies.append(conn.recv())
            except (EOFError, OSError):
                raise self._died() from None
            # one run per worker: closing the pipe now lets it exit while the parent writes
            # report.html, and close() then only reaps it
            conn.close()
        written: list[Path] = []
        for status, value in replies:
            if status == "ok":
                written += value
            elif isinstance(value, BaseException):
                raise value
            else:
                raise PlotWorkerError(value)
        return sorted(written, key=lambda p: FIGURES.index(p.name))

    def _died(self) -> PlotWorkerError:
        """The error for a worker that is gone (its pipe broke): it may still be dying."""
        self._pending = False
        started = [p for p in self._procs if p.pid is not None]
        ended = wait([p.sentinel for p in started], timeout=JOIN_S)
        for proc in started:
            if proc.sentinel in ended:
                proc.join(JOIN_S)
                return PlotWorkerError(f"plot worker exited (code {proc.exitcode}) "
                                       "before the plots were written")
        return PlotWorkerError("plot worker: its pipe closed before the plots were written")

    def close(self) -> None:
        """Close the pipes (the workers' signal to exit) and reap the workers; a worker still
        drawing (an exception left its work unwanted) is terminated, not waited for."""
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            if proc.pid is None:
                continue
            proc.join(0.0 if self._pending else JOIN_S)
            if proc.is_alive():
                proc.terminate()
                proc.join(JOIN_S)
            if proc.is_alive():
                proc.kill()
                proc.join()
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
    # below the parent: these imports (a CPU second per worker) overlap the parent's set-up
    # and simulation, which the report waits on first; at equal priority, three processes on
    # two cores took about a third of a core from the parent (k=8: bring-up 1.4 -> 1.9 s)
    os.nice(WORKER_NICE)
    # what write_plots would import at its first figure, imported while the parent simulates
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401

    from cellfabric.core.plots import write_plots

    while True:
        try:
            m, out_dir, only = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            # done (its PNGs are closed files): out at once, as the parent's close() joins
            # it; the interpreter's own exit tore down matplotlib's modules for 0.1 s
            os._exit(0)
        try:
            reply: tuple[str, Any] = ("ok", write_plots(m, out_dir, only))
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

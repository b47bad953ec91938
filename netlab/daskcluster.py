"""A real Dask cluster on loopback for tests and benches: one `dask scheduler` and N `dask
worker` processes (no nanny, so each worker is exactly one process), ports chosen by the OS,
every process stopped by its own PID on exit.

    with LocalDaskCluster(workers=2) as cluster:
        run(["cellfabric", "sweep", SPEC, "--scheduler", cluster.address])

With ``tls_dir`` (a folder as `cellfabric sweep --make-certs` writes it: ca.crt and
scheduler, worker and client .crt/.key) every process speaks mutual TLS and the address is
tls://.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class ClusterError(RuntimeError):
    pass


def _dask_cli() -> list[str]:
    beside = Path(sys.executable).parent / "dask"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "dask"]


class LocalDaskCluster:
    def __init__(self, workers: int = 2, nthreads: int = 1, start_timeout_s: float = 60.0,
                 tls_dir: Path | None = None) -> None:
        self.workers = workers
        self.tls_dir = tls_dir
        self.nthreads = nthreads
        self.start_timeout_s = start_timeout_s
        self.address = ""
        self._tmp = tempfile.TemporaryDirectory(prefix="cf-dask-")
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> LocalDaskCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen:
        out = open(Path(self._tmp.name) / log, "wb")  # noqa: SIM115 (lives with the process)
        proc = subprocess.Popen([*_dask_cli(), *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=self._tmp.name)
        out.close()
        self._procs.append(proc)
        return proc

    def start(self) -> None:
        sched_file = Path(self._tmp.name) / "scheduler.json"
        self._spawn(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(sched_file), *self._tls("scheduler")],
                    "scheduler.log")
        self.address = self._wait_for(lambda: json.loads(sched_file.read_text())["address"],
                                      "the scheduler to write its address")
        for i in range(self.workers):
            self._spawn(["worker", self.address, "--host", "127.0.0.1", "--no-nanny",
                         "--nthreads", str(self.nthreads), "--no-dashboard",
                         "--name", f"w{i}", *self._tls("worker")], f"worker{i}.log")
        from distributed import Client

        with Client(self.address, timeout=self.start_timeout_s, set_as_default=False,
                    security=self.client_security()) as c:
            if self.workers:  # a scheduler alone (workers=0) is up once it answers
                c.wait_for_workers(self.workers, timeout=self.start_timeout_s)

    def _tls(self, role: str) -> list[str]:
        if self.tls_dir is None:
            return []
        d = self.tls_dir
        # The README's recipe: a worker takes tls from the scheduler's address.
        protocol = ["--protocol", "tls"] if role == "scheduler" else []
        return [*protocol, "--tls-ca-file", str(d / "ca.crt"),
                "--tls-cert", str(d / f"{role}.crt"), "--tls-key", str(d / f"{role}.key")]

    def client_security(self):
        """Dask's Security for a client of this cluster (None without TLS)."""
        if self.tls_dir is None:
            return None
        from distributed.security import Security

        d = self.tls_dir
        return Security(require_encryption=True, tls_ca_file=str(d / "ca.crt"),
                        tls_client_cert=str(d / "client.crt"),
                        tls_client_key=str(d / "client.key"))

    def _wait_for(self, probe, what: str):
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            for p in self._procs:
                if p.poll() is not None:
                    raise ClusterError(f"dask exited ({p.returncode}) waiting for {what}: "
                                       f"{self.logs()[-800:]}")
            try:
                return probe()
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        raise ClusterError(f"timed out waiting for {what}")

    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._procs[1:]]

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(Path(self._tmp.name)
                                                                      .glob("*.log")))

    def stop(self) -> None:
        """Workers first, then the scheduler: SIGTERM, SIGKILL after a grace, each by PID."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        self._tmp.cleanup()

"""A Spark standalone cluster on 127.0.0.1 from a pyspark install: one master, N workers.

Master and workers are started with the install's own ``bin/spark-class`` (the pyspark wheel
has no ``sbin/start-master.sh``), each with OS-chosen ports (``--port 0 --webui-port 0``), one
core and at most 1 GB. Readiness is read from their logs: the master's
"Starting Spark master at spark://..." line gives its URL, each worker's "Successfully
registered with master" says it can take executors. Executors run in their own JVMs, children
of their worker, so a test can kill one (:meth:`StandaloneCluster.executor_pids`).

Used by tests/test_spark_cluster.py for Spark 4.3 (``.venv``) and Spark 3.5 (``.venv-sql``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_SECONDS = 180
MASTER_URL = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
REGISTERED = "Successfully registered with master"


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    """Poll ``condition`` until it returns something true, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _children(pid: int) -> list[int]:
    """Direct children of a process, from /proc (no psutil in the test environments). A JVM
    starts processes from any of its threads, so every thread's list counts."""
    found: list[int] = []
    for tasks in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in tasks.read_text().split()]
        except OSError:
            continue
    return found


def _descendants(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        for child in _children(pending.pop()):
            found.append(child)
            pending.append(child)
    return found


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@dataclass
class StandaloneCluster:
    """``with StandaloneCluster(spark_home, workdir, workers=2) as cluster: cluster.url``."""

    spark_home: Path
    workdir: Path
    workers: int = 2
    worker_memory: str = "1g"
    url: str = ""
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _logs: list[Path] = field(default_factory=list)

    def __enter__(self) -> StandaloneCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _launch(self, name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.workdir / f"{name}.log"
        local = self.workdir / name
        local.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(local),
            "SPARK_WORKER_DIR": str(local / "work"),
            "SPARK_LOG_DIR": str(self.workdir),
            # Daemon JVMs are small: the executors get their own memory.
            "SPARK_DAEMON_MEMORY": "256m",
            # The master's submission REST server would take the fixed port 6066.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self._processes.append(process)
        self._logs.append(log)
        return process, log

    def _log_text(self, log: Path, process: subprocess.Popen[bytes]) -> str:
        if process.poll() is not None:
            raise RuntimeError(f"{log.name} exited with {process.returncode}:\n{log.read_text()}")
        return log.read_text(errors="replace")

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        master, master_log = self._launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--webui-port",
            "0",
        )

        def master_url() -> str | None:
            found = MASTER_URL.search(self._log_text(master_log, master))
            return found.group(1) if found else None

        self.url = str(wait_for(master_url, START_TIMEOUT_SECONDS, "the Spark master"))
        workers = [
            self._launch(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                "1",
                "--memory",
                self.worker_memory,
                self.url,
            )
            for index in range(self.workers)
        ]
        for process, log in workers:
            wait_for(
                lambda p=process, f=log: REGISTERED in self._log_text(f, p),
                START_TIMEOUT_SECONDS,
                f"{log.name} to register with the master",
            )

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers run now (children of the worker processes)."""
        return [
            pid
            for process in self._processes[1:]
            for pid in _descendants(process.pid)
            if "CoarseGrainedExecutorBackend" in _command_line(pid)
        ]

    def kill_executor(self, pid: int) -> None:
        """SIGKILL one executor JVM, as a crashed machine would; its worker notices."""
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Workers first (they stop their executors), then the master; SIGKILL what lingers."""
        for process in reversed(self._processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        self._processes.clear()

    def logs(self, tail: int = 40) -> str:
        """The last lines of every daemon's and executor's log, for a failing test's message."""
        executors = sorted(self.workdir.glob("worker-*/work/*/*/stderr"))
        parts = []
        for log in [*self._logs, *executors]:
            lines = log.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"== {log.relative_to(self.workdir)}\n" + "\n".join(lines))
        return "\n".join(parts)

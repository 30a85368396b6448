"""A Spark 3.5 SQL session with lance-spark's catalogs, driven from the test process.

lance-spark's builds that Maven Central serves here are for Spark 3.5, while the project
(and its Python data source) runs on pyspark 4. Two pysparks cannot share one interpreter, so
the SQL session lives in a child process on ``.venv-sql``'s interpreter (this file, run as a
script), and the tests talk to it over its stdin/stdout, one JSON object per line:

    -> {"conf": {...}}                     start the session with these settings
    -> {"sql": "SELECT ..."}               run a statement, collect its rows
    -> {"concurrent": ["...", "..."]}      run statements at once (one thread each)
    <- {"results": [{"rows": ...} or {"error": ...}, ...]}
    <- {"columns": [...], "rows": [[...]]} or {"error": "AnalysisException", "message": "..."}

The child's own output (Spark's log, Ivy's report) goes to a log file, never to the channel.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import selectors
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SQL_PYTHON = ROOT / ".venv-sql" / "bin" / "python"
# A statement taking longer fails its test as a hang and the child is killed, so one stuck
# Spark job cannot stall a whole test run (statements take seconds on local[2]).
STATEMENT_TIMEOUT_SECONDS = 120
START_TIMEOUT_SECONDS = 180


class SqlError(Exception):
    """A statement failed in the SQL session: ``kind`` is the JVM or Python exception's name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class SqlSession:
    """The child process holding one Spark 3.5 session (``with SqlSession(conf, log) as s``).

    A statement that does not answer within ``timeout`` raises ``TimeoutError``: the child is
    killed (``hangs`` counts it) and the next call starts a new session with the same settings.
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        log_path: Path,
        python: Path = SQL_PYTHON,
        timeout: float = STATEMENT_TIMEOUT_SECONDS,
        env: Mapping[str, str] | None = None,
    ):
        self.conf = dict(conf)
        # The child's environment (default: this process's), e.g. one without AWS credentials.
        self._env = dict(os.environ if env is None else env)
        self.timeout = timeout
        self.hangs = 0
        self._python = python
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self._process: subprocess.Popen[bytes] | None = None
        self._start()

    def _start(self) -> None:
        python = self._python
        env = {**self._env, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
        self._process = subprocess.Popen(
            [str(python), __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=str(ROOT),
        )
        self._call({"conf": self.conf}, START_TIMEOUT_SECONDS)

    def sql(self, statement: str, timeout: float | None = None) -> list[tuple[Any, ...]]:
        """Run ``statement``; its rows as tuples (raises ``SqlError`` when it fails and
        ``TimeoutError`` when it does not answer within ``timeout``)."""
        return [tuple(row) for row in self._call({"sql": statement}, timeout)["rows"]]

    def concurrently(self, statements: list[str]) -> list[list[tuple[Any, ...]] | SqlError]:
        """Run the statements at the same time, one thread each (Spark runs their jobs side by
        side); each one's rows, or the ``SqlError`` it failed with."""
        reply = self._call({"concurrent": statements}, self.timeout * len(statements))
        return [
            SqlError(result["error"], result["message"])
            if "error" in result
            else [tuple(row) for row in result["rows"]]
            for result in reply["results"]
        ]

    def columns(self, statement: str) -> list[str]:
        return self._call({"sql": statement})["columns"]

    def _call(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        timeout = self.timeout if timeout is None else timeout
        if self._process is None:  # the last statement hung: a new session for this one
            self._start()
        assert self._process is not None
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(message).encode() + b"\n")
        self._process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                self._process.kill()
                self._process.wait(30)
                self._process = None
                self.hangs += 1
                raise TimeoutError(
                    f"The SQL session did not answer {message} within {timeout:.0f} s "
                    f"(killed; see {self._log.name})"
                )
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait(30)
            raise RuntimeError(f"The SQL session exited ({code}); see {self._log.name}")
        reply = json.loads(line)
        if "error" in reply:
            raise SqlError(reply["error"], reply["message"])
        return reply

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                self._call({"stop": True})
                self._process.wait(60)
            except Exception:
                self._process.kill()
                self._process.wait(30)
        self._log.close()

    def __enter__(self) -> SqlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# The child process
# ---------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, decimal.Decimal)):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _run(spark: Any, statement: str) -> dict[str, Any]:
    """One statement's reply: its columns and rows, or the error it raised."""
    try:
        frame = spark.sql(statement)
        return {"columns": frame.columns, "rows": [_plain(list(row)) for row in frame.collect()]}
    except Exception as error:
        return _error_reply(error)


def _error_reply(error: Exception) -> dict[str, Any]:
    kind = type(error).__name__
    text = str(error)
    java = getattr(error, "java_exception", None)
    if java is not None:  # Py4JJavaError: name the JVM exception, not the wrapper
        kind = java.getClass().getSimpleName()
        text = str(java.getMessage() or java.toString())
    return {"error": kind, "message": text.strip()[:2000]}


def _serve() -> None:
    # The channel keeps the original stdout; fd 1 becomes the log, so whatever Spark's JVM
    # (a child that inherits fd 1) or py4j prints cannot reach the channel.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from pyspark.sql import SparkSession

    spark = None
    for line in sys.stdin:
        message = json.loads(line)
        try:
            if "conf" in message:
                builder = (
                    SparkSession.builder.master("local[2]")
                    .appName("lance-metastore-sql-tests")
                    .config("spark.ui.enabled", "false")
                    .config("spark.ui.showConsoleProgress", "false")
                    .config("spark.driver.host", "127.0.0.1")
                    .config("spark.driver.bindAddress", "127.0.0.1")
                    .config("spark.sql.shuffle.partitions", "2")
                )
                for key, value in message["conf"].items():
                    builder = builder.config(key, value)
                spark = builder.getOrCreate()
                spark.sparkContext.setLogLevel("ERROR")
                reply: dict[str, Any] = {"ok": True}
            elif "sql" in message:
                reply = _run(spark, message["sql"])
            elif "concurrent" in message:
                with ThreadPoolExecutor(len(message["concurrent"])) as pool:
                    jobs = [pool.submit(_run, spark, text) for text in message["concurrent"]]
                    results = [job.result() for job in jobs]
                reply = {"results": results}
            else:
                if spark is not None:
                    spark.stop()
                channel.write(json.dumps({"ok": True}) + "\n")
                channel.flush()
                return
        except Exception as error:
            reply = _error_reply(error)
        channel.write(json.dumps(reply) + "\n")
        channel.flush()


if __name__ == "__main__":
    _serve()

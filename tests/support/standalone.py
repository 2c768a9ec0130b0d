"""A real Spark standalone cluster for tests: the master and each worker their own JVM, started from the installed
PySpark's `bin/spark-class` as a user starts them by hand, each worker with a clean environment (nothing of the
test's own but what a worker host would have: `PATH`, `HOME`, `JAVA_HOME`, the Python path of this project).

`SPARK_HOME` is a folder of links to PySpark's `bin`, `jars`, `python` and `sbin` under the test's directory
(`bench.distance.spark_home_of_links`, which the benches' `local-cluster` runs use too), so that the workers'
`work/app-*` folders land there, not in the installed package (ARCHITECTURE's facts on `local-cluster`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

from bench.distance import spark_home_of_links as spark_home
from tests.support.ports import free_port
from tests.support.wait import wait_until

#: What every JVM of the cluster gets: small heaps (two cores and a few GB for the whole test run).
DAEMON_MEMORY = "256m"
WORKER_CORES, WORKER_MEMORY = 2, "1g"
START_SECONDS = 60.0


def worker_environment(home: Path, **extra: str) -> dict[str, str]:
    """A worker host's environment: no variable of the test run's (no `YT_TOKEN`, no `SPARK_*`) unless in `extra`."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home.parent), "SPARK_HOME": str(home),
           "SPARK_DAEMON_MEMORY": DAEMON_MEMORY, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return {**env, **extra}


@contextlib.contextmanager
def _daemon(home: Path, name: str, args: list[str], env: Mapping[str, str], ready: str) -> Iterator[Path]:
    """A Spark daemon (`org.apache.spark.deploy.<name>`) in its own process group; its log once `ready` is in it."""
    log = home.parent / f"{name.rsplit('.', 1)[-1].lower()}-{free_port()}.log"
    with log.open("w") as out:
        process = subprocess.Popen([str(home / "bin" / "spark-class"), f"org.apache.spark.deploy.{name}", *args],
                                   env=dict(env), stdout=out, stderr=subprocess.STDOUT, cwd=home.parent,
                                   start_new_session=True)
    try:
        wait_until(lambda: ready in log.read_text() or process.poll() is not None, START_SECONDS,
                   lambda: f"{name} to log {ready!r}: {log.read_text()[-2000:]}")
        assert process.poll() is None, log.read_text()[-4000:]
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the worker's executors are in its group
        process.wait()


@contextlib.contextmanager
def standalone_master(root: Path) -> Iterator[str]:
    """A standalone master on loopback; yields its URL (`spark://127.0.0.1:<port>`)."""
    home = spark_home(root)
    port = free_port()
    args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())]
    with _daemon(home, "master.Master", args, worker_environment(home), "I have been elected leader"):
        yield f"spark://127.0.0.1:{port}"


@contextlib.contextmanager
def standalone_worker(root: Path, master: str, **env: str) -> Iterator[Path]:
    """A worker registered with `master`, its environment `worker_environment` plus `env`; yields its log."""
    home = spark_home(root)
    args = ["--host", "127.0.0.1", "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
            "--webui-port", str(free_port()), "--work-dir", str(root / "work"), master]
    with _daemon(home, "worker.Worker", args, worker_environment(home, **env),
                 "Successfully registered with master") as log:
        yield log

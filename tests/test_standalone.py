"""A real Spark standalone cluster (master and worker as their own JVMs, the worker with a clean environment) copies a
queue through the YTsaurus stand-in, which asks for a token, into tables in at-least-once and transactional modes;
an executor without a token fails the query at once with the one clear error, and acknowledges nothing.

The driver is a child process (`tests/scripts/standalone_driver.py`: one SparkContext per JVM, and the test run's
own session is `local[2]`) with the token in its environment, as a user's first try has it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from streaming_core.cluster.errors import EXECUTOR_TOKEN_HOWTO
from tests.support.cluster import make_queue
from tests.support.sink import COPY_SCHEMA, fill_queue, make_table, multiset, ordered_rows
from tests.support.standalone import standalone_master, standalone_worker
from tests.support.standin import STANDIN_TOKEN

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).parent / "scripts" / "standalone_driver.py"
MODES = ("at-least-once", "transactional")
ROWS_PER_TABLET = 10_000
PARTITIONS = 2
#: A query whose executors have no token fails "at once": a task attempt's first request refused (401) ends it, with
#: no retry of its own; Spark's attempts of each task (`spark.task.maxFailures`, 4 on a cluster) are all there is.
TASK_ATTEMPTS = 4
#: A guard against a hang or a retry loop, far above the seconds it takes (under 10 on an idle machine: measured and
#: printed, not bounded tighter, since a loaded machine's Python worker starts swing it).
NO_TOKEN_FAILS_WITHIN_SECONDS = 60.0
#: An executor's log line of a task's start or failure, e.g.
#: `26/11/27 04:25:19 INFO Executor: Running task 0.0 in stage 0.0 (TID 0)`.
TASK_EVENT = r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d) {}"
TASK_STARTED, TASK_FAILED = "INFO Executor: Running task ", "ERROR Executor: Exception in task "


def run_driver(master: str, uri: str, root: str, checkpoints: Path, *modes: str) -> dict[str, dict]:
    env = {**os.environ, "YT_TOKEN": STANDIN_TOKEN}
    done = subprocess.run([sys.executable, str(DRIVER), master, uri, root, str(checkpoints), *modes], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["mode"]: r for r in results}


def first_task_event(work: Path, event: str) -> float:
    """When the first task of the first application on the worker started or failed (its executor's log, local
    time, to the second)."""
    [log] = sorted(work.glob("app-*/*/stderr"))[:1]
    stamp = re.search(TASK_EVENT.format(re.escape(event)), log.read_text(), re.MULTILINE).group(1)
    return datetime.strptime(stamp, "%y/%m/%d %H:%M:%S").timestamp()


def refused_requests(standin) -> int:
    """The requests the stand-in refused for want of a token so far."""
    return sum(1 for s in standin.served if s.status == 401 and s.authorization is None)


def test_a_standalone_cluster_copies_every_row_once_in_both_modes_and_executors_without_a_token_fail_at_once(
        standin, standin_cluster, tmp_path):
    yt, root = standin_cluster, f"//tmp/standalone-{uuid.uuid4().hex[:8]}"
    make_queue(yt, f"{root}/queue", partitions=PARTITIONS)
    written = fill_queue(yt, f"{root}/queue", ROWS_PER_TABLET)
    for mode in MODES:
        yt.create_consumer(f"{root}/consumer-{mode}", recursive=True)
        yt.register_queue_consumer(f"{root}/queue", f"{root}/consumer-{mode}")
        make_table(yt, f"{root}/out-{mode}", COPY_SCHEMA)
    checkpoints = tmp_path / "checkpoints"

    with standalone_master(tmp_path) as master:
        # The worker's environment has no token: only the driver's has it.
        refused_before = refused_requests(standin)
        with standalone_worker(tmp_path, master):
            [failed] = run_driver(master, standin.uri, root, checkpoints, MODES[0]).values()
        refused = refused_requests(standin) - refused_before
        assert failed["error"] and "the Spark executors have no YTsaurus token" in failed["error"]
        assert EXECUTOR_TOKEN_HOWTO in failed["error"]
        assert "failed to authenticate" not in failed["error"]
        assert STANDIN_TOKEN not in failed["error"]
        failed_after = failed["ended"] - first_task_event(tmp_path / "work", TASK_FAILED)
        assert 0 < refused <= TASK_ATTEMPTS * PARTITIONS, refused
        assert failed_after < NO_TOKEN_FAILS_WITHIN_SECONDS, failed_after
        first_task = failed["ended"] - first_task_event(tmp_path / "work", TASK_STARTED)
        # Nothing acknowledged, nothing written.
        assert yt.get_consumer_offsets(f"{root}/consumer-{MODES[0]}", f"{root}/queue") in ({}, {0: 0, 1: 0})
        assert ordered_rows(yt, f"{root}/out-{MODES[0]}") == []

        # The same worker host with the token in its environment: every row arrives once, in both modes, and the
        # failed query's checkpoint goes on from where it failed.
        with standalone_worker(tmp_path, master, YT_TOKEN=STANDIN_TOKEN):
            results = run_driver(master, standin.uri, root, checkpoints, *MODES)
    print(json.dumps({"no_token_requests_refused": refused,
                      "no_token_query_failed_after_first_failure_seconds": round(failed_after, 1),
                      "no_token_query_failed_after_first_task_seconds": round(first_task, 1),
                      "no_token_query_seconds": failed["seconds"],
                      **{f"{mode}_seconds": r["seconds"] for mode, r in results.items()}}))
    for mode in MODES:
        assert results[mode]["error"] is None, results[mode]["error"][-3000:]
        assert multiset(ordered_rows(yt, f"{root}/out-{mode}"), "data", "n") == multiset(written, "data", "n")

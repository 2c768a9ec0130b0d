"""A query stopped while its `foreachBatch` function writes with `df.write.format("yt")`: the stop is clean (no
`StackOverflowError` in Spark's stop detection), the write's abort never raises, and the target is left as its
mode promises with no staging left behind (unless Spark lost the abort in its own stop race: `SPARK_LOST_ABORT`).

The cause, measured: a failing `foreachBatch` function's Py4J error text (10 kB with the JVM stack trace) overflows the
stack in Spark's `StreamExecution.PROXY_ERROR` regex; `streaming_core.foreach_batch` bounds it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from dataclasses import replace
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from structlog.testing import capture_logs

from streaming_core.cluster import connect
from streaming_core.cluster.base import STATIC
from streaming_core.foreach_batch import MAX_TEXT, CompactJavaError
from streaming_core.options import SinkOptions
from streaming_core.save_modes import CREATE, NewTableWriter, SaveDecision
from streaming_core.sink import SinkPlan, TableSchema, YtBatchWriter, YtStreamWriter

DRIVER = Path(__file__).parent / "scripts" / "foreach_batch_stop_driver.py"
SCHEMA = [{"name": "id", "type": "int64"}, {"name": "payload", "type": "string"}]
#: Rows of 100 bytes each write appends (about 4 s on 2 idle cores), and when the query is stopped.
ROWS, STOP_AFTER_S = 3_000_000, 1.5


def java_error(spark, call) -> Py4JJavaError:
    with pytest.raises(Py4JJavaError) as caught:
        call(spark._jvm)
    return caught.value


def interrupted(jvm) -> None:
    """A JVM call that fails as an interrupted write does: `java.lang.InterruptedException` from a blocking call."""
    jvm.java.lang.Thread.currentThread().interrupt()
    jvm.java.lang.Thread.sleep(10)


def proxy_error_matches(spark, text: str) -> bool:
    """Spark's own stop detection (`StreamExecution.PROXY_ERROR`) on `text`, run in the JVM."""
    module = getattr(spark._jvm.org.apache.spark.sql.execution.streaming.runtime, "StreamExecution$")
    return bool(getattr(module, "MODULE$").PROXY_ERROR().pattern().matcher(text).find())


def callback_text(error: BaseException) -> str:
    """What Py4J hands the JVM for a callback that raised `error`: the traceback's text."""
    try:
        raise error
    except BaseException:
        return traceback.format_exc()


@pytest.mark.spark
def test_a_failed_writes_text_is_too_long_for_sparks_stop_detection_and_the_compact_one_is_recognised(spark) -> None:
    error = java_error(spark, interrupted)
    compact = CompactJavaError(error)

    with pytest.raises(Py4JJavaError, match="StackOverflowError"):
        proxy_error_matches(spark, callback_text(error) + "\tat x.Y.z(Y.java:1)\n" * 200)  # a real stack's length
    assert proxy_error_matches(spark, callback_text(compact))
    assert len(str(compact)) <= MAX_TEXT and isinstance(compact, Py4JJavaError)
    assert f"py4j.protocol.Py4JJavaError: {error.errmsg}.\n: java.lang.InterruptedException" in callback_text(compact)


@pytest.mark.spark
def test_a_query_stopped_during_a_foreach_batch_write_stops_cleanly_and_leaves_what_each_mode_promises(
        tmp_path: Path) -> None:
    uri = f"local://{tmp_path / 'cluster'}"
    with connect(uri) as yt:
        yt.create("table", "//out/static", recursive=True, attributes={"schema": SCHEMA})
        yt.write_table("//out/static", [{"id": -1, "payload": "before"}])
        yt.create("table", "//out/dynamic", attributes={"schema": SCHEMA, "dynamic": True})
    targets = ["//out/static", "//out/dynamic", "//out/new"]
    scenarios = [{"target": t, "rows": ROWS, "stop_after": STOP_AFTER_S} for t in targets]
    out = tmp_path / "results.json"

    run = subprocess.run([sys.executable, str(DRIVER), uri, json.dumps(scenarios), str(out)],
                         capture_output=True, text=True, timeout=600, check=False)

    assert run.returncode == 0, run.stderr[-5000:]
    assert "StackOverflowError" not in run.stderr
    for result in json.loads(out.read_text()):
        assert result["batches_written"] == [], f"{result['target']}: the stop came after the write"
        assert result["stopped_in"] is not None and result["exception"] is None, result
    with connect(uri) as yt:
        left = sorted(set(yt.list("//out")) - {"dynamic", "static"})
        assert left == [] or (SPARK_LOST_ABORT in run.stderr and all(map(is_write_temporary, left))), left
        assert yt.get_tablet_infos("//out/dynamic")[0].total_row_count == 0  # all or nothing
        static = [row for batch in yt.read_table("//out/static") for row in batch.to_pylist()]
        assert static[0] == {"id": -1, "payload": "before"} and len(static) < ROWS + 1  # appends: at least once


#: What Spark logs when the abort it calls fails before reaching the writer. `MicroBatchExecution.stop` cancels the
#: query's jobs, then interrupts its thread: under load the interrupt can land while the failed write's abort starts its
#: Python worker (on that same thread, where a `foreachBatch` function's calls run), and the abort is lost. The target
#: is untouched all the same; only the write's temporaries remain (named by `is_write_temporary`).
SPARK_LOST_ABORT = "failed to abort"


def is_write_temporary(name: str) -> bool:
    """A batch write's staging directory (`<table>_staging`) or the table a new table is filled in (`.writing-`)."""
    return name.endswith("_staging") or ".writing-" in name


def broken(plan: SinkPlan) -> SinkPlan:
    """The plan, on a cluster that cannot be reached: every cleanup step fails."""
    return replace(plan, options=replace(plan.options, cluster="yt-unknown-scheme://x"))


@pytest.fixture
def plan(cluster_uri: str, yt, yt_root: str) -> SinkPlan:
    path = f"{yt_root}/target"
    yt.create("table", path, attributes={"schema": SCHEMA, "dynamic": True})
    options = SinkOptions.parse({"path": path, "cluster": cluster_uri, "tuning_path": f"{yt_root}/tuning"}, {})
    return SinkPlan(options, TableSchema.from_yt(SCHEMA), "ordered", staging_root=f"{path}_staging/q")


@pytest.mark.parametrize("writer", ["stream", "batch", "new_table"])
def test_an_abort_whose_cleanup_fails_logs_it_and_never_raises(plan: SinkPlan, writer: str) -> None:
    abort = {
        "stream": lambda: YtStreamWriter(broken(plan)).abort([None], 3),
        "batch": lambda: on_plan(YtBatchWriter(plan), broken(plan)).abort([None]),
        "new_table": lambda: NewTableWriter(broken(replace(plan, kind=STATIC)),
                                            SaveDecision("//p", "append", CREATE)).abort([None]),
    }[writer]

    with capture_logs() as logs:
        abort()

    assert [e["event"] for e in logs if e["event"] == "sink_abort_failed"]
    assert all("InvalidUriError" in e["error"] for e in logs if e["event"] == "sink_abort_failed")


def on_plan(writer: YtBatchWriter, plan: SinkPlan) -> YtBatchWriter:
    """A writer made (its staging root too), then left with `plan` for its abort: the cluster goes away meanwhile."""
    writer.plan = plan
    return writer

"""Driver for the sink's fault-injection tests: queue -> `yt` sink, `availableNow`, killed at a chosen point.

Usage: `python sink_fault_driver.py CLUSTER_URI SCENARIOS_JSON [YT_ROOT]`, where the JSON is a list of scenarios, run
one after the other in this process (one Spark start for several resumed queries), and `YT_ROOT` the local directory
that `yt:///` checkpoint locations map to (a YTsaurus stand-in's storage; default: as `build_session` maps them):

    {"queue": "//...", "consumer": "//...", "target": "//...", "checkpoint": "yt:///...",
     "mode": "at_least_once" | "transactional" | "idempotent" | "producer" | "queue_to_queue", "max_rows": 30,
     "fail_batch": 2, "fault": "before_write" | "during_write" | "after_write" | "after_commit"}

`fault`/`fail_batch` are optional. Faults are injected without hooks in the product: the `yt` format is
re-registered as a subclass of the session's data source whose stream writer (a subclass of `YtStreamWriter`)
SIGKILLs this driver's whole process group (driver, its JVM, the Python runners) and its workers' (a machine crash)
when batch `fail_batch` reaches the fault point:

- before_write: in a task's `write()`, before any row of the batch is written;
- during_write: in a task's `write()`, after two dyn_batch_size chunks of the task were inserted (or staged), or
  after the scenario's `crash_after_rows` rows (a moment the test picks at random);
- after_write: in `commit()`, before the sink commits (every task has written);
- after_commit: in `commit()`, after the sink committed, before Spark writes the batch to its commit log.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator

import pyarrow as pa
from pyspark import TaskContext

from streaming_core import build_session
from streaming_core.datasource import register
from streaming_core.session import checkpoint_conf
from streaming_core.sink import YtStreamWriter

#: Rows per insert call, and rows a task writes before a `during_write` fault (two chunks and a bit).
DYN_BATCH_SIZE = 10
DURING_WRITE_AFTER_ROWS = 25


def crash(driver_pid: int) -> None:
    """SIGKILL the driver's process group and this process's: nothing of the driver, its JVM or its workers survives.

    PySpark's worker daemon puts itself and the workers it forks in a process group of their own: killing the
    driver's group alone leaves a worker running its task to the end (on YTsaurus, inserting the rest of its rows)."""
    own = os.getpgid(0)
    driver = os.getpgid(driver_pid)
    if driver != own:
        os.killpg(driver, signal.SIGKILL)
    os.killpg(own, signal.SIGKILL)


class FaultyWriter(YtStreamWriter):
    def __init__(self, writer: YtStreamWriter, fault: str | None, fail_batch: int | None, driver_pid: int,
                 crash_after_rows: int) -> None:
        super().__init__(writer.plan)
        self.crash_after_rows = crash_after_rows
        self.fault = fault
        self.fail_batch = fail_batch
        self.driver_pid = driver_pid

    def _armed(self, point: str, batch_id: int) -> bool:
        return self.fault == point and batch_id == self.fail_batch

    def write(self, iterator: Iterator[pa.RecordBatch]):
        batch_id = int(TaskContext.get().getLocalProperty("streaming.sql.batchId"))
        if self._armed("before_write", batch_id):
            crash(self.driver_pid)
        if self._armed("during_write", batch_id):
            iterator = self._crash_after(iterator, self.crash_after_rows)
        return super().write(iterator)

    def _crash_after(self, iterator: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
        """Hand the rows on in one-row batches and crash when the next row past `rows` is asked for."""
        sent = 0
        for batch in iterator:
            for i in range(batch.num_rows):
                if sent == rows:
                    crash(self.driver_pid)
                yield batch.slice(i, 1)
                sent += 1

    def commit(self, messages, batchId: int) -> None:
        if self._armed("after_write", batchId):
            crash(self.driver_pid)
        super().commit(messages, batchId)
        if self._armed("after_commit", batchId):
            crash(self.driver_pid)


def run(spark, scenario: dict) -> None:
    base = register(spark)

    class FaultySource(base):
        fault = scenario.get("fault")
        fail_batch = scenario.get("fail_batch")
        driver_pid = os.getpid()

        def streamWriter(self, schema, overwrite):
            writer = super().streamWriter(schema, overwrite)
            return FaultyWriter(writer, self.fault, self.fail_batch, self.driver_pid,
                                scenario.get("crash_after_rows", DURING_WRITE_AFTER_ROWS))

    spark.dataSource.register(FaultySource)
    mode = scenario["mode"]
    df = (spark.readStream.format("yt")
          .option("consumer_path", scenario["consumer"])
          .option("max_rows_per_partition", scenario["max_rows"])
          .option("include_service_columns", mode in ("idempotent", "queue_to_queue"))
          .load(scenario["queue"]))
    writer = (df.writeStream.format("yt")
              .option("checkpointLocation", scenario["checkpoint"])
              .option("path", scenario["target"])
              .option("dyn_batch_size", DYN_BATCH_SIZE)
              .option("transactional", mode == "transactional"))
    if mode in ("producer", "queue_to_queue"):  # the producer next to the target, made by the first run
        writer = (writer.option("producer_path", scenario["target"] + "_producer").option("create_producer", True)
                  .option("producer_sequence", "source" if mode == "queue_to_queue" else "batch"))
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()


def main() -> None:
    cluster, scenarios = sys.argv[1], json.loads(sys.argv[2])
    checkpoints = checkpoint_conf(f"local://{sys.argv[3]}") if len(sys.argv) > 3 else {}
    spark = build_session("sink-fault", master="local[2]", cluster=cluster, conf={
        "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "512m", **checkpoints})
    for scenario in scenarios:
        run(spark, scenario)
    spark.stop()


if __name__ == "__main__":
    main()

"""`opsd demo`: the README's main job, end to end on an embedded cluster.

A queue, a consumer and a result table; a producer at a fixed rate; the seed listing 3 pipeline
(`data` -> `data_length`) run by opsd's runner with its metrics endpoint; a live terminal view with the
backlog as a progress bar; then a drain, a graceful stop and a summary (rows in, rows out, batches,
batch durations). Exit 0 when every produced row reached the result table.
"""

from __future__ import annotations

import shutil
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from opsd.config import (
    HttpSettings,
    OpsdConfig,
    PipelineConfig,
    SinkConfig,
    SourceConfig,
    SparkSettings,
    TransformConfig,
    TriggerConfig,
)
from opsd.daemon import graceful_timeout_seconds, monitor_for, session_for
from opsd.produce import batch_rows_for, generated_batches, paced
from opsd.runner import Runner
from streaming_core.cluster import Cluster, TableSchema, connect

QUEUE = "//home/demo/queue"
CONSUMER = "//home/demo/consumer"
RESULT = "//home/demo/result"
CHECKPOINT = "yt:///home/demo/checkpoints"
QUEUE_SCHEMA = [{"name": "data", "type": "string"}]
RESULT_SCHEMA = [{"name": "data", "type": "string"}, {"name": "data_length", "type": "int32"}]
#: Seed listing 3 as a SQL transform.
TRANSFORM_SQL = "SELECT data, length(data) AS data_length FROM source"
DRAIN_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class DemoSettings:
    rate: float = 2000
    duration: float = 30
    partitions: int = 2
    port: int = 9108
    root: str = ".opsd/demo"
    max_rows_per_partition: int = 20_000


@dataclass
class Producer:
    """Appends generated rows to the queue at `rate` rows/s in a thread until stopped."""

    cluster: Cluster
    rate: float
    produced: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        schema = TableSchema.from_yt(QUEUE_SCHEMA)
        for batch in paced(generated_batches(schema, 10**12, batch_rows_for(self.rate)), self.rate):
            if self._stop.is_set():
                return
            self.cluster.insert_rows(QUEUE, batch.rows)
            self.produced += len(batch.rows)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="opsd-demo-producer", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def prepare_cluster(root: Path, partitions: int) -> Cluster:
    """A fresh embedded cluster with the demo's queue, registered consumer and result table."""
    shutil.rmtree(root, ignore_errors=True)
    cluster = connect(f"local://{root}")
    cluster.create("table", QUEUE, recursive=True,
                   attributes={"dynamic": True, "tablet_count": partitions, "schema": QUEUE_SCHEMA})
    cluster.create_consumer(CONSUMER, recursive=True)
    cluster.register_queue_consumer(QUEUE, CONSUMER)
    cluster.create("table", RESULT, recursive=True, attributes={"dynamic": True, "schema": RESULT_SCHEMA})
    return cluster


def demo_config(settings: DemoSettings, root: Path) -> OpsdConfig:
    pipeline = PipelineConfig(
        name="data_length",
        source=SourceConfig(format="yt", path=QUEUE, options={
            "consumer_path": CONSUMER, "max_rows_per_partition": str(settings.max_rows_per_partition)}),
        transform=TransformConfig(sql=TRANSFORM_SQL),
        sink=SinkConfig(format="yt", path=RESULT),
        trigger=TriggerConfig(processing_time="1 second"),
        checkpoint_location=CHECKPOINT,
    )
    spark = SparkSettings(master="local[2]", app_name="opsd-demo", conf={"spark.ui.showConsoleProgress": "false"})
    return OpsdConfig(cluster=f"local://{root}", spark=spark,
                      http=HttpSettings(port=settings.port), pipelines=[pipeline])


def rows_in_result(cluster: Cluster) -> int:
    return sum(t.total_row_count for t in cluster.get_tablet_infos(RESULT))


def batches_done(last_batch_id: int | None) -> int:
    """Batches completed so far: batch ids start at 0."""
    return 0 if last_batch_id is None else last_batch_id + 1


def view(produced: int, written: int, status: dict, url: str | None) -> Group:
    """The live terminal view: counters and the backlog as a bar."""
    table = Table.grid(padding=(0, 2))
    q = status.get("data_length", {})
    for label, value in (("metrics", f"{url}/metrics" if url else "-"), ("rows produced", produced),
                         ("rows written", written), ("batches", batches_done(q.get("last_batch_id"))),
                         ("query active", q.get("active"))):
        table.add_row(label, str(value))
    backlog = Progress(TextColumn("backlog"), BarColumn(), TextColumn("{task.completed:,.0f} rows"))
    backlog.add_task("backlog", total=max(produced, 1), completed=max(0, produced - written))
    return Group(table, backlog)


def run_demo(settings: DemoSettings, console: Console | None = None) -> int:
    """Run the demo; see the module docstring. Ctrl-C ends the producing phase early."""
    console = console or Console()
    root = Path(settings.root).resolve()
    cluster = prepare_cluster(root, settings.partitions)
    config = demo_config(settings, root)
    spark = session_for(config)
    monitor = monitor_for(spark, config)
    runner = Runner(spark, list(config.pipelines), monitor.recorder)
    producer = Producer(cluster, settings.rate)
    started = time.monotonic()
    runner.start()
    producer.start()
    try:
        with Live(console=console, refresh_per_second=4) as live:

            def refresh() -> None:
                live.update(view(producer.produced, rows_in_result(cluster),
                                 monitor.recorder.status.to_json()["queries"], monitor.url))

            try:
                while not settings.duration or time.monotonic() - started < settings.duration:
                    refresh()
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            producer.stop()
            deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
            while rows_in_result(cluster) < producer.produced and time.monotonic() < deadline:
                refresh()
                time.sleep(0.5)
            refresh()
    finally:
        producer.stop()
        runner.stop(graceful_timeout_seconds(config))
        monitor.listener.flush(5)
    durations = batch_durations(runner)
    monitor.detach()
    spark.stop()
    written = rows_in_result(cluster)
    console.print()
    console.print(summary(producer.produced, written, durations, time.monotonic() - started))
    return 0 if written >= producer.produced else 1


def batch_durations(runner: Runner) -> list[float]:
    """triggerExecution seconds of the recent batches that read rows (Spark keeps the last 100)."""
    query = runner.supervisors[0].query
    progress = query.recentProgress if query is not None else []
    return [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] > 0]


def summary(rows_in: int, rows_out: int, durations: list[float], elapsed: float) -> Table:
    table = Table(title="opsd demo summary")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("rows in (produced)", f"{rows_in:,}")
    table.add_row("rows out (result table)", f"{rows_out:,}")
    table.add_row("elapsed seconds", f"{elapsed:.1f}")
    if durations:
        table.add_row("batches", str(len(durations)))
        table.add_row("batch duration p50 / max (s)", f"{statistics.median(durations):.2f} / {max(durations):.2f}")
    table.add_row("result", "OK: every row arrived" if rows_out >= rows_in else "MISSING ROWS")
    return table

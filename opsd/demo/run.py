"""`opsd demo`, run: produce into the demo's queue while opsd runs its pipeline, show it live, then drain and sum up.

A producer at a fixed rate; the seed listing 3 pipeline (`data` -> `data_length`) run by opsd's runner with its
metrics endpoint (`opsd.runtime.lifecycle`, as `opsd run`); a spinner while Spark starts; a live view
(`opsd.demo.view`); then a drain, a graceful stop, a summary (rows in, rows out, batches, batch durations) and the
commands to try next. The terminal belongs to the view: opsd's logs and everything Spark prints go to a log file next
to the cluster root (`<root>.log`). Exit 0 when every produced row reached the result table.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from opsd.demo.producer import Producer
from opsd.demo.scenario import (
    PIPELINE,
    QUEUE,
    QUEUE_SCHEMA,
    DemoSettings,
    demo_config,
    prepare_cluster,
    rows_in_result,
)
from opsd.demo.view import Display, Snapshot, next_steps, summary
from opsd.runtime.lifecycle import Running, running
from opsd.runtime.runner import Runner
from opsd.telemetry.logs import TRACES_LOGGER, configure_logging
from opsd.telemetry.terminal import Shown
from streaming_core.cluster import Cluster, TableSchema

DRAIN_TIMEOUT_SECONDS = 60.0
REFRESH_SECONDS = 0.5


def log_file_for(root: Path) -> Path:
    """Where the demo's logs go: beside the cluster root, which is wiped at every start."""
    return root.with_name(root.name + ".log")


def run_demo(settings: DemoSettings, console: Console | None = None) -> int:
    """Run the demo; see the module docstring. Ctrl-C ends the producing phase early."""
    console = console or Console()
    root = Path(settings.root).resolve()
    log_file = log_file_for(root)
    cluster = prepare_cluster(root, settings.partitions)
    producer = Producer(cluster, QUEUE, TableSchema.from_yt(QUEUE_SCHEMA), settings.rate)
    log_file.write_text("")
    with open(log_file, "a", encoding="utf-8") as log_stream, contextlib.ExitStack() as restore:
        # The log file keeps a failure's whole trace too (the JVM's own lines about it are held back).
        configure_logging("INFO", stream=log_stream, json_lines=True, levels={TRACES_LOGGER: "DEBUG"})
        restore.callback(configure_logging, "WARNING")
        console.print(Shown()(f"opsd demo: starting Spark; logs in {log_file}"), soft_wrap=True)
        with contextlib.ExitStack() as app_context:
            with _starting(console):
                app = app_context.enter_context(running(demo_config(settings, root), spark_output=log_file))
                app.runner.start()
            producer.start()
            last = _watch(app, cluster, producer, settings, Display(console), str(log_file))
            durations = batch_durations(app.runner)
    console.print(summary(last, durations))
    console.print(next_steps(f"local://{root}"), soft_wrap=True)
    return 0 if last.written >= last.produced else 1


@contextlib.contextmanager
def _starting(console: Console) -> Iterator[None]:
    """A spinner with the seconds spent while Spark starts (about 20 s on 2 cores), so the screen is never still;
    transient: gone once the view takes over, and nothing when the output is not a terminal."""
    with Progress(SpinnerColumn(), TextColumn("starting Spark and the pipeline"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        progress.add_task("start", total=None)
        yield


def _watch(app: Running, cluster: Cluster, producer: Producer, settings: DemoSettings, display: Display,
           log_file: str) -> Snapshot:
    """Show the run while producing, then while draining, then once more after the graceful stop; returns the
    last snapshot (taken after the listener's queued events were recorded, so it counts every finished batch)."""
    started = time.monotonic()

    def snapshot() -> Snapshot:
        query = app.runner.supervisors[0].query
        return Snapshot(time.monotonic() - started, producer.produced, rows_in_result(cluster),
                        app.monitor.recorder.status.get(PIPELINE), app.monitor.url, log_file,
                        query.status["message"] if query is not None else "starting the query")

    with display:
        try:
            while not settings.duration or time.monotonic() - started < settings.duration:
                display.show(snapshot())
                time.sleep(REFRESH_SECONDS)
        except KeyboardInterrupt:
            pass
        producer.stop()
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
        while rows_in_result(cluster) < producer.produced and time.monotonic() < deadline:
            display.show(snapshot())
            time.sleep(REFRESH_SECONDS)
        app.stop()
        last = snapshot()
        display.show(last)
    return last


def batch_durations(runner: Runner) -> list[float]:
    """triggerExecution seconds of the recent batches that read rows (Spark keeps the last 100)."""
    query = runner.supervisors[0].query
    progress = query.recentProgress if query is not None else []
    return [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] > 0]

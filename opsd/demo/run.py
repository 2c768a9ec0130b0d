"""`opsd demo`, run: produce into the demo's queue while opsd runs its pipeline, show it live, then drain and sum up.

A producer at a fixed rate; the seed listing 3 pipeline (`data` -> `data_length`) run by opsd's runner with its
metrics endpoint (`opsd.runtime.lifecycle`, as `opsd run`); a live terminal view with the backlog as a bar; then
a drain, a graceful stop and a summary (rows in, rows out, batches, batch durations). Exit 0 when every produced
row reached the result table.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.live import Live

from opsd.demo.producer import Producer
from opsd.demo.scenario import QUEUE, QUEUE_SCHEMA, DemoSettings, demo_config, prepare_cluster, rows_in_result
from opsd.demo.view import summary, view
from opsd.runtime.lifecycle import running
from opsd.runtime.runner import Runner
from streaming_core.cluster import TableSchema

DRAIN_TIMEOUT_SECONDS = 60.0


def run_demo(settings: DemoSettings, console: Console | None = None) -> int:
    """Run the demo; see the module docstring. Ctrl-C ends the producing phase early."""
    console = console or Console()
    root = Path(settings.root).resolve()
    cluster = prepare_cluster(root, settings.partitions)
    producer = Producer(cluster, QUEUE, TableSchema.from_yt(QUEUE_SCHEMA), settings.rate)
    with running(demo_config(settings, root)) as app:
        started = time.monotonic()  # the producing phase lasts `duration` once Spark is up
        app.runner.start()
        producer.start()
        try:
            with Live(console=console, refresh_per_second=4) as live:

                def refresh() -> None:
                    live.update(view(producer.produced, rows_in_result(cluster),
                                     app.monitor.recorder.status.to_json()["queries"], app.monitor.url))

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
            app.stop()
        durations = batch_durations(app.runner)
    written = rows_in_result(cluster)
    console.print()
    console.print(summary(producer.produced, written, durations, time.monotonic() - started))
    return 0 if written >= producer.produced else 1


def batch_durations(runner: Runner) -> list[float]:
    """triggerExecution seconds of the recent batches that read rows (Spark keeps the last 100)."""
    query = runner.supervisors[0].query
    progress = query.recentProgress if query is not None else []
    return [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] > 0]

"""The alert fidelity matrix: each fault opsd reports reaches an on-call webhook as its alert, in time, with the right
labels and runbook link, and a healthy run pages nobody; with the faults injected, every dashboard panel has data.

Real components: opsd's listener, recorder, check scheduler with the watchdog, desync (with a decision history), lag,
Queue Agent signals, trim forecast and vital-consumer checks, and its HTTP endpoint, on the embedded cluster; a real
Prometheus scraping it and evaluating the shipped rule file with every duration (`for`, range windows, offsets)
divided by one factor, `SCALE`; a real Alertmanager (Debian `prometheus-alertmanager`) posting to a local webhook.
Faults are injected the way opsd meets them, through its own code paths (Spark's listener events built from the
JSON Spark posts, the runner's restart report, a checkpoint and consumer that disagree on the cluster, the endpoint
going away), without a Spark query: none of these alerts needs one, and a Spark restart per fault costs minutes.

Adding a fault is one `Fault` entry in `FAULTS`: the alert it must raise, the labels the page must carry, and how
to inject it. The OOM risk and the tuner's decisions go in through the recorder, as their checks report them.

Rows trimmed soon runs the whole way on the embedded cluster: a queue with `@auto_trim_config`, written every second,
read by another job's vital consumer and trimmed by the embedded auto-trimmer every second, as YTsaurus' Queue Agent
does, while the query's consumer stands still; the trim forecast must page before the trimmer deletes a row the query
has not read (the lead time, from the page to that loss, is reported as the test's `lead_seconds` property).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client import CollectorRegistry
from pyspark.sql.streaming.listener import QueryProgressEvent, QueryStartedEvent, QueryTerminatedEvent

from grafana import build
from opsd.checks.cycle import Cycle, Step
from opsd.checks.desync.check import DesyncCheck
from opsd.checks.health.check import Watchdog
from opsd.checks.lag.check import LagCheck
from opsd.checks.queue_agent.check import QueueAgentCheck
from opsd.checks.scheduler import CheckScheduler
from opsd.checks.trim.check import TrimCheck
from opsd.checks.vital.check import VitalConsumerCheck
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.observe.listener import OpsdListener
from opsd.observe.phases import BatchPhases, shares_of
from opsd.observe.readiness import ProgressPolicy
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.autotune import Decision, Direction, Knob, TunerDecision, TuneReason, TunerMode
from opsd.results.producers import ProducerCounts, ProducerReport, ProducerState, Session
from opsd.stores.history.apply import HistoryLog
from opsd.stores.history.table import history_path
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.metrics import Metrics
from streaming_core.auto_trim import AutoTrimConfig
from streaming_core.cluster import Cluster, connect
from streaming_core.cluster.embedded.auto_trimmer import AutoTrimmer
from streaming_core.phases import PHASES, READ_WAIT, SINK_INSERT, SPARK_OTHER
from streaming_core.producer_fences import Fence
from streaming_core.sink_producer import SEQUENCE_STRIDE
from tests.support.checkpoint import job_with_checkpoint
from tests.support.oom import oom_verdict
from tests.support.ports import free_port
from tests.support.prometheus import PROMETHEUS
from tests.support.retention import retention_job
from tests.support.wait import wait_until

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
ALERTS_FILE = Path(__file__).resolve().parent.parent / "helm" / "opsd" / "files" / "alerts.yaml"
#: Shipped durations are divided by this: a rule's `for: 5m` becomes 2.5 s here, its 15-minute windows 7.5 s.
SCALE = 120
#: Prometheus' rule evaluation interval (scrapes are every second).
EVALUATION_SECONDS = 2.0
#: Waiting beyond the deadline before giving up, so a late alert is reported as late rather than as missing.
GRACE_SECONDS = 60.0
#: What the checks' background thread does every second: like opsd's scheduler, at the scaled pace.
CHECK_PERIOD_SECONDS = 1.0

pytestmark = [pytest.mark.prometheus,
              pytest.mark.skipif(PROMETHEUS is None or ALERTMANAGER is None,
                                 reason="needs `prometheus` and `prometheus-alertmanager` (Debian packages)")]

_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(duration: str) -> float:
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION.findall(duration))


def scaled(duration: str) -> str:
    return f"{max(1, round(seconds(duration) * 1000 / SCALE))}ms"


def scaled_rules(text: str) -> dict:
    """The rule file with every duration divided by `SCALE`: `for`, `[range]` windows and `offset`s."""
    groups = yaml.safe_load(text)
    for group in groups["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = scaled(rule["for"])
            rule["expr"] = re.sub(r"\[(\w+)\]", lambda m: f"[{scaled(m.group(1))}]", rule["expr"])
            rule["expr"] = re.sub(r"offset (\w+)", lambda m: f"offset {scaled(m.group(1))}", rule["expr"])
    return groups


SHIPPED = {rule["alert"]: rule for group in yaml.safe_load(ALERTS_FILE.read_text())["groups"]
           for rule in group["rules"]}
#: How long a healthy run lasts: the longest `for` of the rules, scaled (30 minutes: well over the issue's 5).
HEALTHY_SECONDS = max(seconds(rule.get("for", "0s")) for rule in SHIPPED.values()) / SCALE


def query_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Opsd:
    """One opsd as the alerts see it: its listener, recorder, scheduled checks and endpoint, and the cluster.

    `targets` are the checkpoints the desync and lag checks watch; they grow as faults are injected.
    """

    metrics: Metrics
    recorder: Recorder
    listener: OpsdListener
    server: OpsHttpServer
    cluster_uri: str
    cluster: Cluster
    workdir: Path
    targets: list[QueryTarget] = field(default_factory=list)
    feeds: list[Callable[[], None]] = field(default_factory=list)
    #: When a query first lost rows it had not read to the queue's trimming (unix seconds), by query.
    losses: dict[str, float] = field(default_factory=dict)

    def start_query(self, name: str) -> None:
        """The runner registers the pipeline, then Spark posts its start."""
        self.recorder.register(name, trigger_interval_seconds=1.0)
        self.listener.onQueryStarted(QueryStartedEvent.fromJson(
            {"id": query_id(name), "runId": query_id(f"run-{name}"), "name": name, "timestamp": iso(time.time())}))

    def progress(self, name: str, batch_id: int, end: int, latest: int) -> None:
        """A micro-batch of `name`, as Spark posts it, that read a 1-partition queue up to `end` of `latest`."""
        now = time.time()
        offset = {"cluster": "local", "path": f"//queues/{name}", "partitions": {"0": end}}
        source = {"description": "yt", "startOffset": offset, "endOffset": offset,
                  "latestOffset": {**offset, "partitions": {"0": latest}}, "numInputRows": 10,
                  "inputRowsPerSecond": 10.0, "processedRowsPerSecond": 50.0}
        state = {"operatorName": "stateStoreSave", "numRowsTotal": 5, "numRowsUpdated": 1, "numRowsRemoved": 0,
                 "allUpdatesTimeMs": 1, "allRemovalsTimeMs": 0, "commitTimeMs": 1, "memoryUsedBytes": 4096,
                 "numRowsDroppedByWatermark": 0, "numShufflePartitions": 2, "numStateStoreInstances": 2}
        self.listener.onQueryProgress(QueryProgressEvent.fromJson({"progress": {
            "id": query_id(name), "runId": query_id(f"run-{name}"), "name": name, "timestamp": iso(now),
            "batchId": batch_id, "batchDuration": 200, "numInputRows": 10, "inputRowsPerSecond": 10.0,
            "processedRowsPerSecond": 50.0,
            "durationMs": {"triggerExecution": 200, "addBatch": 150, "latestOffset": 10, "walCommit": 20},
            "eventTime": {"watermark": iso(now - 30)}, "stateOperators": [state], "sources": [source],
            "sink": {"description": "yt", "numOutputRows": 10}}}))

    def fail(self, name: str) -> None:
        """Spark posts the query's termination with its failure."""
        self.listener.onQueryTerminated(QueryTerminatedEvent.fromJson({
            "id": query_id(name), "runId": query_id(f"run-{name}"), "errorClassOnException": None,
            "exception": "java.lang.IllegalStateException: executor lost"}))

    def schedule_checks(self, scheduler: CheckScheduler) -> None:
        """opsd's scheduled checks at the scaled pace, plus the feeds that post progress like running queries."""
        positions = PositionsCollector(self.cluster_uri)
        positions.targets = self.targets  # one list: faults add their checkpoints to it
        # The idle query keeps a decision history, as a pipeline does next to its tuning document: its heal goes in.
        history = HistoryLog({"idle": history_path(None, "//tmp/fidelity/idle/consumer_tuning")}, self.recorder, 100)
        desync, lag = DesyncCheck(self.recorder, positions, history), LagCheck(self.recorder, positions)
        trim, vital = TrimCheck(self.recorder, positions), VitalConsumerCheck(self.recorder, positions)
        scheduler.add_check("feeds", lambda: [feed() for feed in list(self.feeds)], CHECK_PERIOD_SECONDS)
        scheduler.add_check("watchdog", Watchdog(self.recorder, ProgressPolicy(min_window_seconds=60 / SCALE)).run,
                            CHECK_PERIOD_SECONDS)
        cycle = Cycle(self.recorder, positions, [  # in the registry's order
            Step(check, CHECK_PERIOD_SECONDS)
            for check in (lag, QueueAgentCheck(self.recorder, positions), trim, vital, desync)])
        scheduler.add_check(cycle.name, cycle.run, CHECK_PERIOD_SECONDS)


@dataclass(frozen=True)
class Fault:
    """One fault: the alert it must raise, the labels its page must carry, and how to inject it into opsd."""

    name: str
    alert: str
    inject: Callable[[Opsd, str], None]
    labels: dict[str, str] = field(default_factory=dict)
    per_query: bool = True


def stall(opsd: Opsd, query: str) -> None:
    """A batch left backlog, then silence: the watchdog finds no progress within the window."""
    opsd.start_query(query)
    opsd.progress(query, 0, end=9, latest=99)


def crash_loop(opsd: Opsd, query: str) -> None:
    """The query fails, is restarted and fails again; the runner reports its backoff at the cap."""
    opsd.start_query(query)
    for attempt in range(2):
        time.sleep(1.5)  # a scrape between failures: the failure counters rise, not just appear
        opsd.fail(query)
        opsd.recorder.record_restart(query, crash_loop=attempt > 0)
        opsd.listener.onQueryStarted(QueryStartedEvent.fromJson({
            "id": query_id(query), "runId": query_id(f"run-{query}"), "name": query, "timestamp": iso(time.time())}))


def desync(consumer_at: int, trim_to: int | None = None, rows: int = 60) -> Callable[[Opsd, str], None]:
    """A checkpoint committed to row 20 of both partitions (after a batch to row 10) of a queue of `rows` rows (30 per
    partition by default), a consumer at `consumer_at`, the queue trimmed to `trim_to`; the desync check finds it on the
    cluster."""

    def inject(opsd: Opsd, query: str) -> None:
        root = f"//tmp/fidelity/{query}"
        opsd.cluster.create("map_node", root, recursive=True)
        queue, _, location = job_with_checkpoint(opsd.cluster, root, opsd.workdir / query,
                                                 {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}, committed=1, rows=rows,
                                                 consumer_at=consumer_at)
        if trim_to is not None:
            for partition in (0, 1):
                opsd.cluster.trim_rows(queue, partition, trim_to, past_vital_consumers=True)
        opsd.targets.append(QueryTarget(query, location))

    return inject


#: Rows each partition of the trimming queue keeps (`retained_rows`) and gets written per second: 10 unread rows at
#: the start, so the query's next row is trimmed (291 - 10) / 20 = 14 s after the writes start.
TRIM_RETAINED_ROWS, TRIM_WRITE_ROWS = 290, 20


def rows_trimmed_soon(opsd: Opsd, query: str) -> None:
    """The query's consumer stands at row 10 while 20 rows a second arrive per partition, another job's vital
    consumer reads them all and the auto-trimmer trims every second down to `TRIM_RETAINED_ROWS`: rows the query has
    not read are deleted about 14 s on. `opsd.losses[query]` notes when the trimmer first deletes one."""
    root = f"//tmp/fidelity/{query}"
    opsd.cluster.create("map_node", root, recursive=True)
    job = retention_job(opsd.cluster, root, opsd.workdir / query, read_to=10,
                        config=AutoTrimConfig(True, TRIM_RETAINED_ROWS))
    trimmer = AutoTrimmer(opsd.cluster)

    def write_read_and_trim() -> None:
        job.produce(opsd.cluster, TRIM_WRITE_ROWS)
        job.other_reads_to(opsd.cluster, opsd.cluster.get_tablet_infos(job.queue)[0].total_row_count)
        if any(t.after > 10 for t in trimmer.run_pass([job.queue])):
            opsd.losses.setdefault(query, time.time())

    opsd.targets.append(QueryTarget(query, job.location))
    opsd.feeds.append(write_read_and_trim)


def growing_backlog(opsd: Opsd, query: str) -> None:
    """Each second a batch completes, and each leaves 10 more rows behind than the one before."""
    opsd.start_query(query)
    batches = iter(range(10**6))

    def feed() -> None:
        batch = next(batches)
        opsd.progress(query, batch, end=batch * 10, latest=batch * 20 + 5)

    opsd.feeds.append(feed)


def tuner_decision(query: str, knob: Knob, current: int, recommended: int, reason: TuneReason,
                   bounds: tuple[int, int]) -> TunerDecision:
    """One decision of the auto-tuner, as its check reports it to the recorder (mode apply)."""
    decision = Decision(query, knob, current, recommended, reason)
    return TunerDecision(decision, TunerMode.APPLY, decision.direction != Direction.HOLD, bounds)


def tuner_pinned(opsd: Opsd, query: str) -> None:
    """Batches keep finishing fast: the tuner raises the cap to its upper bound and keeps recommending it there."""
    opsd.start_query(query)
    opsd.recorder.record_autotune(tuner_decision(query, Knob.MAX_ROWS, 200_000, 500_000,
                                                 TuneReason.SAFE_CAP, (1000, 500_000)))
    opsd.feeds.append(lambda: opsd.recorder.record_autotune(tuner_decision(
        query, Knob.MAX_ROWS, 500_000, 500_000, TuneReason.SAFE_CAP, (1000, 500_000))))


def oom_risk_high(opsd: Opsd, query: str) -> None:
    """The OOM check predicts the next batch past the heap's limit (and a batch already died of it)."""
    opsd.start_query(query)

    def judge() -> None:
        opsd.recorder.record_oom_pool(query, "jvm_heap", risk=1.2, predicted_peak_bytes=5.5e8, peak_bound_bytes=6e8,
                                      exceed_probability=0.8, limit_bytes=5e8, observed_peak_bytes=4.5e8)
        opsd.recorder.record_oom(query, oom_verdict(1.2, 1000, 8 << 20, batch_bytes=2e8), target_risk=0.7)

    judge()
    opsd.recorder.record_memory_failure(query, "jvm_heap")
    opsd.feeds.append(judge)


def producer_report(query: str, ahead: tuple[str, ...] = (), fences: tuple[Fence, ...] = ()) -> ProducerReport:
    """A producer-mode query's producer, as the producers check reports it."""
    sessions = (Session(f"{query}-p0", 3, 4 * SEQUENCE_STRIDE, 4, 0, 0),)
    state = ProducerState.SESSIONS_AHEAD if ahead else ProducerState.ZOMBIE_FENCED if fences else ProducerState.OK
    return ProducerReport(query, "//p", "//out", "batch", time.time(), state, sessions, 3, fences=fences,
                          sessions_ahead=ahead)


def producer_sessions_ahead(opsd: Opsd, query: str) -> None:
    """The query's batch ids began again under its old session names: its sessions stand ahead of it, and each
    batch's rows are skipped as written before."""
    opsd.start_query(query)
    opsd.feeds.append(lambda: opsd.recorder.record_producers(
        producer_report(query, ahead=(f"{query}-p0",)), ProducerCounts(epoch_bumps=1, skipped_rows=10), ()))


def producer_zombie_fenced(opsd: Opsd, query: str) -> None:
    """A task attempt Spark had given up on pushes after its retry: the producer refuses it, the check counts it."""
    opsd.start_query(query)
    opsd.recorder.record_producers(producer_report(query), ProducerCounts(), ())
    time.sleep(1.5)  # a scrape between: the counter rises from 0, not born at 1
    fence = Fence(f"{query}-p0", 2, 4, 0, 0, time.time())
    opsd.recorder.record_producers(producer_report(query, fences=(fence,)), ProducerCounts(fenced_zombies=1),
                                   (fence,))


def gone(opsd: Opsd, query: str) -> None:
    """The opsd endpoint goes away (the pod died or stopped answering)."""
    opsd.server.stop()


OPSD_GONE = Fault("opsd gone", "OpsdMetricsAbsent", gone, {"severity": "critical", "job": "opsd"}, per_query=False)
ROWS_TRIMMED_SOON = Fault("rows trimmed soon", "OpsdRowsTrimmedSoon", rows_trimmed_soon, {"severity": "critical"})
#: Faults injected one after the other while opsd runs (`OPSD_GONE` ends the matrix: it takes opsd away).
FAULTS = [
    Fault("query stalled", "OpsdQueryStalled", stall, {"severity": "critical"}),
    Fault("crash loop", "OpsdQueryCrashLooping", crash_loop, {"severity": "critical"}),
    Fault("desync stuck", "OpsdConsumerStuck", desync(consumer_at=5), {"severity": "warning", "state": "stuck"}),
    Fault("consumer ahead", "OpsdOffsetDesyncUnsafe", desync(consumer_at=25),
          {"severity": "critical", "state": "consumer_ahead"}),
    Fault("behind trim", "OpsdOffsetDesyncUnsafe", desync(consumer_at=20, trim_to=25),
          {"severity": "critical", "state": "behind_trim"}),
    Fault("queue recreated", "OpsdOffsetsBeyondQueueEnd", desync(consumer_at=0, rows=6),
          {"severity": "critical", "state": "checkpoint_ahead_of_queue"}),
    Fault("backlog growing", "OpsdBacklogGrowing", growing_backlog, {"severity": "warning"}),
    Fault("tuner pinned at a bound", "OpsdTunerPinnedAtBound", tuner_pinned,
          {"severity": "warning", "knob": "max_rows_per_partition", "bound": "max"}),
    Fault("OOM risk high", "OpsdOomRiskHigh", oom_risk_high, {"severity": "warning", "pool": "jvm_heap"}),
    Fault("producer sessions ahead", "OpsdProducerSessionsAhead", producer_sessions_ahead, {"severity": "critical"}),
    Fault("zombie fenced", "OpsdProducerZombieFenced", producer_zombie_fenced, {"severity": "warning"}),
]


class Webhook:
    """The on-call end: records every alert Alertmanager posts, with the time it arrived."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.extend((time.time(), alert) for alert in body["alerts"] if alert["status"] == "firing")
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def first(self, alert: str, labels: dict[str, str]) -> tuple[float, dict] | None:
        return next(((at, a) for at, a in self.received
                     if a["labels"]["alertname"] == alert and labels.items() <= a["labels"].items()), None)


def start(command: list[str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def wait_ready(url: str, process: subprocess.Popen, log: Path) -> None:
    def ready() -> bool:
        assert process.poll() is None, log.read_text()[-3000:]
        try:
            return requests.get(url, timeout=2).ok
        except requests.ConnectionError:
            return False

    wait_until(ready, 60, lambda: f"{url} to be ready: {log.read_text()[-3000:]}", interval=0.3)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, cluster_uri: str) -> Iterator[tuple[Opsd, Webhook, str]]:
    """opsd (a healthy query running from the start), Prometheus and Alertmanager, shared by the matrix."""
    workdir = tmp_path_factory.mktemp("fidelity")
    metrics = Metrics(CollectorRegistry())
    recorder = Recorder(metrics, StatusStore())
    listener = OpsdListener(recorder, metrics)
    listener.start()
    server = OpsHttpServer(metrics.render, host="127.0.0.1", port=0)
    server.start()
    webhook = Webhook()
    cluster = connect(cluster_uri)
    opsd = Opsd(metrics, recorder, listener, server, cluster_uri, cluster, workdir)
    opsd.start_query("healthy")
    opsd.recorder.record_tuning("healthy", max_rows_per_partition=1000, dyn_batch_size=50000,
                                max_bytes_per_partition=16 << 20)
    for knob, current, bounds in ((Knob.MAX_ROWS, 1000, (100, 100_000)),
                                  (Knob.MAX_BYTES, 16 << 20, (1 << 20, 256 << 20)),
                                  (Knob.DYN_BATCH_SIZE, 50_000, (1000, 100_000))):  # the tuner holds within its bounds
        opsd.recorder.record_autotune(tuner_decision("healthy", knob, current, current, TuneReason.STABILISING, bounds))
    healthy_batches = iter(range(10**6))
    opsd.feeds.append(lambda: opsd.progress("healthy", (b := next(healthy_batches)), end=b * 10, latest=b * 10 + 3))
    # Where each of its batches spends its time (the phases check's result; its own tests run it on real batches).
    phase_batches = iter(range(10**6))
    opsd.feeds.append(lambda: record_batch_phases(opsd.recorder, "healthy", next(phase_batches)))
    # An idle query whose consumer lags its committed batch by one: healthy, and healed by the desync check.
    cluster.create("map_node", "//tmp/fidelity/idle", recursive=True)
    idle_queue, idle_consumer, idle_checkpoint = job_with_checkpoint(
        cluster, "//tmp/fidelity/idle", workdir / "idle", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}, committed=1,
        consumer_at=10)
    opsd.targets.append(QueryTarget("idle", idle_checkpoint, idle_queue, idle_consumer, heal=True))

    am_address = f"127.0.0.1:{free_port()}"
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump({
        "route": {"receiver": "webhook", "group_by": ["..."], "group_wait": "0s", "group_interval": "1s",
                  "repeat_interval": "1h"},
        "receivers": [{"name": "webhook", "webhook_configs": [{"url": webhook.url, "send_resolved": False}]}],
    }))
    alertmanager = start([ALERTMANAGER, f"--config.file={workdir / 'alertmanager.yml'}",
                          f"--storage.path={workdir / 'am-data'}", f"--web.listen-address={am_address}",
                          "--cluster.listen-address="], workdir / "alertmanager.log")
    (workdir / "rules.yml").write_text(yaml.safe_dump(scaled_rules(ALERTS_FILE.read_text()), sort_keys=False))
    prometheus_address = f"127.0.0.1:{free_port()}"
    (workdir / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": f"{EVALUATION_SECONDS:g}s"},
        "rule_files": [str(workdir / "rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [am_address]}]}]},
        "scrape_configs": [{"job_name": "opsd", "static_configs": [{"targets": [f"127.0.0.1:{server.port}"]}]}],
    }))
    prometheus = start([PROMETHEUS, f"--config.file={workdir / 'prometheus.yml'}",
                        f"--storage.tsdb.path={workdir / 'prom-data'}", f"--web.listen-address={prometheus_address}"],
                       workdir / "prometheus.log")
    scheduler = CheckScheduler(metrics)
    opsd.schedule_checks(scheduler)
    scheduler.start()
    try:
        wait_ready(f"http://{am_address}/-/ready", alertmanager, workdir / "alertmanager.log")
        wait_ready(f"http://{prometheus_address}/-/ready", prometheus, workdir / "prometheus.log")
        yield opsd, webhook, f"http://{prometheus_address}"
    finally:
        scheduler.shutdown()
        listener.stop()
        for process in (prometheus, alertmanager):
            process.kill()
            process.wait(10)
        webhook.server.shutdown()
        server.stop()
        cluster.close()


def scraped(prometheus: str, promql: str) -> bool:
    response = requests.get(f"{prometheus}/api/v1/query", params={"query": promql}, timeout=5)
    return bool(response.ok and response.json()["data"]["result"])


def active_since(prometheus: str, alert: str, labels: dict[str, str]) -> float:
    """When Prometheus first found the alert's expression true (`activeAt`), in unix seconds."""
    for item in requests.get(f"{prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]:
        if item["labels"]["alertname"] == alert and labels.items() <= item["labels"].items():
            return datetime.fromisoformat(item["activeAt"].replace("Z", "+00:00")).timestamp()
    pytest.fail(f"{alert} {labels} reached the webhook but Prometheus does not list it active")


def test_the_scaled_rules_are_the_shipped_rules_with_durations_divided_by_the_factor():
    rules = {rule["alert"]: rule for group in scaled_rules(ALERTS_FILE.read_text())["groups"]
             for rule in group["rules"]}
    assert rules["OpsdQueryDown"]["for"] == f"{5 * 60_000 // SCALE}ms"
    fifteen_minutes = f"{15 * 60_000 // SCALE}ms"
    assert f"[{fifteen_minutes}]" in rules["OpsdBacklogGrowing"]["expr"]
    assert f"offset {fifteen_minutes}" in rules["OpsdQueryFailures"]["expr"]
    for name, rule in rules.items():
        shipped = SHIPPED[name]
        assert (rule["labels"], rule["annotations"]) == (shipped["labels"], shipped["annotations"])
        duration = r"\d+(?:ms|s|m|h|d)\b"
        assert re.sub(duration, "D", rule["expr"]) == re.sub(duration, "D", shipped["expr"])


def test_a_healthy_run_sends_no_alert(stack):
    _, webhook, prometheus = stack
    wait_until(lambda: scraped(prometheus, 'opsd_source_backlog_rows{query="healthy"}'), 60,
               "Prometheus to scrape the healthy query", interval=0.5)
    time.sleep(HEALTHY_SECONDS + 2 * EVALUATION_SECONDS)
    assert webhook.received == []


def assert_pages(stack: tuple[Opsd, Webhook, str], fault: Fault) -> tuple[str, float]:
    """Inject `fault` and see its alert reach the webhook within `for` + 2 evaluation intervals of its becoming
    active, with the fault's labels and its runbook link; the healthy query never pages. Returns the query the fault
    was injected as and when its page arrived."""
    opsd, webhook, prometheus = stack
    query = f"{fault.name.replace(' ', '_')}_{uuid.uuid4().hex[:6]}"
    labels = {**fault.labels, **({"query": query} if fault.per_query else {})}
    budget = seconds(SHIPPED[fault.alert].get("for", "0s")) / SCALE + 2 * EVALUATION_SECONDS
    fault.inject(opsd, query)
    arrived, alert = wait_until(lambda: webhook.first(fault.alert, labels), budget + GRACE_SECONDS,
                                lambda: f"{fault.alert} {labels} to reach the webhook: {webhook.received}")
    assert alert["annotations"]["runbook_url"] == build.runbook_url(fault.alert)
    assert alert["labels"]["instance"] == f"127.0.0.1:{opsd.server.port}"
    late = arrived - active_since(prometheus, fault.alert, labels)
    assert late <= budget, f"{fault.alert} arrived {late:.1f}s after it became active; allowed {budget:.1f}s"
    assert [a["labels"] for _, a in webhook.received if a["labels"].get("query") in ("healthy", "idle")] == []
    return query, arrived


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name)
def test_each_fault_pages_its_alert_in_time_with_its_labels_and_runbook(stack, fault: Fault):
    assert_pages(stack, fault)


def test_rows_trimmed_soon_pages_before_the_auto_trimmer_deletes_a_row_the_query_has_not_read(stack, record_property):
    opsd = stack[0]
    query, arrived = assert_pages(stack, ROWS_TRIMMED_SOON)
    lost = wait_until(lambda: opsd.losses.get(query), 60, f"the auto-trimmer to trim rows {query} has not read")
    record_property("lead_seconds", round(lost - arrived, 1))
    assert lost > arrived, f"the page came {arrived - lost:.1f}s after the rows were lost"


def grafana_substituted(expr: str, pipeline: str) -> str:
    """What Grafana sends Prometheus for `expr` with every variable at All and `pipeline` picked."""
    values = {"$__rate_interval": "20s", "$query": ".*", "$namespace": ".*", "$instance": ".*", "$pipeline": pipeline}
    for variable, value in values.items():
        expr = expr.replace(variable, value)
    return expr


def test_with_the_faults_injected_every_dashboard_panel_and_annotation_has_data(stack):
    """Runs after the faults (they feed the panels that only have data during one); a tuning decision is made, and a
    claim is counted lost (opsd would stop then: only its counter is fed here)."""
    opsd, _, prometheus = stack
    opsd.recorder.record_tuning("healthy", max_rows_per_partition=2000, dyn_batch_size=60000)
    opsd.recorder.record_claim_lost("healthy", "consumer")
    time.sleep(3)  # scraped and evaluated
    pipelines = [status.name for status in opsd.recorder.status.snapshot().values()]
    empty = []
    for make in build.DASHBOARDS.values():
        dashboard = make()
        for expr in build.expressions(dashboard):
            if not any(scraped(prometheus, grafana_substituted(expr, pipeline)) for pipeline in pipelines):
                empty.append(f"{dashboard['title']}: {expr}")
    assert empty == []


def test_opsd_gone_pages_that_no_metrics_arrive(stack):
    assert_pages(stack, OPSD_GONE)


def record_batch_phases(recorder: Recorder, query: str, batch_id: int) -> None:
    """One measured batch of `query`: a second, mostly reads, as the phases check records it."""
    seconds = {**dict.fromkeys(PHASES, 0.0), READ_WAIT: 0.6, SINK_INSERT: 0.3, SPARK_OTHER: 0.1}
    batch = BatchPhases(batch_id, 1.0, seconds, 0.9)
    shares = shares_of([batch])
    assert shares is not None
    recorder.record_phases(query, shares, (batch,))

"""Build the Grafana dashboards from code and write their JSON.

Run ``python -m grafana.build`` after changing this file and commit the output. Dashboards are code
so that a review shows the PromQL, not a diff of panel coordinates, and so that a test can prove they
use only metrics that :mod:`opsd.telemetry.metrics` defines. The same JSON is written twice, to
``grafana/dashboards/`` (for import by hand) and to the Helm chart's ``files/dashboards/`` (for the
dashboards ConfigMap): Helm can only read files inside the chart, and a symlink would not survive
``helm package``. This script is the one source of both copies; a test checks they equal a fresh build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grafana.promql import SCRAPE_LABELS, defined_series, unknown_labels, unknown_metrics
from opsd.config.thresholds import (
    BATCH_DURATION_HIGH_SECONDS,
    LAG_HIGH_SECONDS,
    OOM_RISK_HIGH,
    TIME_TO_DRAIN_LONG_SECONDS,
    TRIM_ETA_SHORT_SECONDS,
    VITAL_CONSUMER_STALLED_SECONDS,
    WATERMARK_DELAY_HIGH_SECONDS,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
ALERTS_FILE = REPO_ROOT / "helm" / "opsd" / "files" / "alerts.yaml"
OUTPUT_DIRS = (REPO_ROOT / "grafana" / "dashboards", REPO_ROOT / "helm" / "opsd" / "files" / "dashboards")

# Every panel and variable queries the data source picked in the `datasource` variable, so the
# dashboard imports into any Grafana whatever its Prometheus data source is called.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The matcher every per-query selector of the overview carries; a test checks no panel forgets it.
Q = 'query=~"$query"'
# The drill-down's matcher: one pipeline of one opsd (namespace and instance keep two releases' same-named
# queries apart).
P = 'namespace=~"$namespace", instance=~"$instance", query="$pipeline"'
# The runbooks: sections of the chart README, one per alert (the alert rules' runbook_url links the same).
RUNBOOK_BASE = "https://github.com/yt-streaming-opsd/yt-streaming-opsd/blob/main/helm/opsd/README.md"
GRID_WIDTH = 24
BATCH_DURATION = "opsd_batch_duration_seconds"
BATCH_TIME = "opsd_batch_time_seconds_total"
# The desync states of offsets past the queue's end (opsd.checks.desync.evaluate.AHEAD_OF_QUEUE; the alert
# OpsdOffsetsBeyondQueueEnd matches the same).
BEYOND_QUEUE_END = "checkpoint_ahead_of_queue|consumer_ahead_of_queue"
_LABEL_VALUES = re.compile(r"label_values\((\w+)(?:\{[^}]*\})?,\s*(\w+)\)")


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel and the legend of its series."""

    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class Panel:
    """A panel before layout: what it shows, not where."""

    title: str
    description: str
    targets: tuple[Target, ...]
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12
    height: int = 8
    # For state timelines of 0/1 gauges: (text, colour) shown for 0 and for 1.
    states: tuple[tuple[str, str], tuple[str, str]] | None = None
    # A value from which the panel turns red (drawn as a line): the threshold of the alert on it.
    bad_above: float | None = None
    # ... or under which it is red (a time left, such as the trim forecast).
    bad_below: float | None = None
    # The alert whose runbook the description links.
    runbook: str | None = None
    # Series drawn on top of each other (parts of a whole).
    stacked: bool = False


@dataclass(frozen=True)
class Row:
    """A titled row of panels, laid out left to right and wrapped at the grid width."""

    title: str
    panels: tuple[Panel, ...]


def duration(seconds: float) -> str:
    """A threshold in seconds as a description says it: `15 minutes`, `1 hour`."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


def quantile(q: float, metric: str, by: str, matchers: str) -> str:
    """The ``q`` quantile of a histogram over the panel's interval, per ``by`` labels."""
    return (
        f"histogram_quantile({q}, sum by (le, {by}) "
        f"(rate({metric}_bucket{{{matchers}}}[$__rate_interval])))"
    )


def phases_panel(matcher: str, width: int) -> Panel:
    """Where the batches' time goes: each phase's share of the measured batches' time, stacked to 100% per query."""
    rate = f"rate({BATCH_TIME}{{{matcher}}}[$__rate_interval])"
    return Panel("Where batch time goes", "Share of the measured micro-batches' time in each phase: planning, "
                 "worker_start (starting Python workers), read_wait (waiting for the cluster's reads), decode, "
                 "transform (the query's transformation), sink_insert (encoding and inserting), commit (the sink's), "
                 "acknowledge (the consumer advance), spark_other (the rest of Spark's trigger). The largest part is "
                 "what to work on; opsd doctor says it in words. Each query stacks to 100%: select one to read it.", (
                     Target(f"sum by (query, phase) ({rate}) / ignoring (phase) group_left sum by (query) ({rate})",
                            "{{query}} {{phase}}"),
                 ), unit="percentunit", width=width, stacked=True)


def boolean_panel(title: str, description: str, expr: str, one: str, one_is_good: bool = False,
                  runbook: str | None = None) -> Panel:
    """A state timeline of a 0/1 gauge per query, so a flapping query shows as stripes."""
    good, bad = "green", "red"
    states = (("no", bad), (one, good)) if one_is_good else (("no", good), (one, bad))
    width = 8 if runbook is None else 6
    return Panel(title, description, (Target(expr, "{{query}}"),), kind="state-timeline", width=width,
                 states=states, runbook=runbook)


def silence_panel(matcher: str, width: int) -> Panel:
    """Seconds since the last progress and since opsd last heard from the query (progress or idle event): an idle
    query is heard from every few seconds, so only a query silent on both counts looks stalled."""
    return Panel("Time since last progress and since heard from", "Seconds since the last micro-batch and since the "
                 "last progress or idle event: an idle query's last batch is old but it is heard from; a stalled one "
                 "is not heard from either.", (
                     Target(f"time() - opsd_last_progress_timestamp_seconds{{{matcher}}}", "{{query}} progress"),
                     Target(f"time() - opsd_last_heard_timestamp_seconds{{{matcher}}}", "{{query}} heard from"),
                 ), unit="s", width=width, runbook="OpsdQueryStalled")


def lag_row(matcher: str, who: str) -> Row:
    """Unread rows, lag, rates and time to drain of the queries ``matcher`` selects; ``who`` starts each legend."""
    return Row("Backlog, lag and time to drain", (
        Panel("Unread rows per partition", "The queue's end minus the next row the query reads.", (
            Target(f"opsd_queue_unread_rows{{{matcher}}}", who + "{{queue}}/{{partition}}"),
        ), unit="suffix:rows", width=6, runbook="OpsdBacklogGrowing"),
        Panel("Lag per partition", "Age of the next row to read; 0 when nothing is unread. Red above the OpsdLagHigh "
              f"threshold ({duration(LAG_HIGH_SECONDS)}).", (
                  Target(f"opsd_queue_lag_seconds{{{matcher}}}", who + "{{queue}}/{{partition}}"),
              ), unit="s", width=6, bad_above=LAG_HIGH_SECONDS, runbook="OpsdLagHigh"),
        Panel("Queue input vs read rows/s", "Rows written to the queues against rows the query moved past, averaged "
              "over opsd's lag window.", (
                  Target(f"opsd_queue_input_rows_per_second{{{matcher}}}", who + "input"),
                  Target(f"opsd_queue_read_rows_per_second{{{matcher}}}", who + "read"),
              ), unit="suffix:rows/s", width=6),
        Panel("Time to drain", "Backlog / (read rate - input rate); +Inf (not drawn) while not draining. Red above "
              f"the OpsdTimeToDrainLong threshold ({duration(TIME_TO_DRAIN_LONG_SECONDS)}).", (
                  Target(f"opsd_time_to_drain_seconds{{{matcher}}}", "{{query}}"),
              ), unit="s", width=6, bad_above=TIME_TO_DRAIN_LONG_SECONDS, runbook="OpsdTimeToDrainLong"),
        Panel("Queue Agent: writes and the consumer", "Per partition as YTsaurus' Queue Agent sees it (opsd's own "
              "measurements where it serves nothing: served = 0): rows written per second, rows past the consumer's "
              "offset, the consumer's processing lag.", (
                  Target(f"opsd_queue_write_rows_per_second{{{matcher}}}", who + "{{queue}}/{{partition}} written/s"),
                  Target(f"opsd_consumer_unread_rows{{{matcher}}}", who + "{{queue}}/{{partition}} unread"),
                  Target(f"opsd_consumer_processing_lag_seconds{{{matcher}}}",
                         who + "{{queue}}/{{partition}} lag s"),
                  Target(f"opsd_queue_agent_served{{{matcher}}}", who + "{{queue}} served"),
              ), unit="short", width=12),
        Panel("Consumer disposition", "Where the consumer's offset stands in each partition: up_to_date, "
              "pending_consumption, expired (past the trim: rows lost to it), ahead (past the queue's end).", (
                  Target(f"opsd_consumer_disposition{{{matcher}}} == 1",
                         who + "{{queue}}/{{partition}} {{disposition}}", instant=True),
              ), kind="table", width=12),
    ))


def state_row(matcher: str, who: str) -> Row:
    """Event time and state of the queries ``matcher`` selects; ``who`` starts each legend."""
    return Row("State and event time", (
        Panel("Watermark delay", "Progress time minus the event-time watermark. Red above the OpsdWatermarkDelayHigh "
              f"threshold ({duration(WATERMARK_DELAY_HIGH_SECONDS)}).", (
                  Target(f"opsd_watermark_delay_seconds{{{matcher}}}", "{{query}}"),
              ), unit="s", width=8, bad_above=WATERMARK_DELAY_HIGH_SECONDS, runbook="OpsdWatermarkDelayHigh"),
        Panel("State rows", "Rows held by each stateful operator.", (
            Target(f"opsd_state_rows{{{matcher}}}", who + "{{operator}}"),
        ), unit="suffix:rows", width=8),
        Panel("State memory", "Memory used by each stateful operator's state store.", (
            Target(f"opsd_state_memory_bytes{{{matcher}}}", who + "{{operator}}"),
        ), unit="bytes", width=8),
    ))


def memory_row(matcher: str, who: str) -> Row:
    """The OOM check's view of the next batch of the queries ``matcher`` selects; ``who`` starts each legend."""
    return Row("OOM risk of the next batch", (
        Panel("OOM risk", "Upper bound of the next micro-batch's peak (at checks.oom_confidence) over each memory "
              "pool's limit, and the model's probability that the peak passes the limit. Red at the OpsdOomRiskHigh "
              f"threshold ({OOM_RISK_HIGH:g}).", (
                  Target(f"opsd_oom_risk{{{matcher}}}", who + "{{pool}}"),
                  Target(f"opsd_oom_exceed_probability{{{matcher}}}", who + "{{pool}} P(over the limit)"),
              ), unit="percentunit", width=8, bad_above=OOM_RISK_HIGH, runbook="OpsdOomRiskHigh"),
        Panel("Memory peak: expected, bound, observed, limit",
              "Per pool: the next batch's expected peak and its upper bound, the last batch's measured peak, the "
              "pool's limit.",
              tuple(Target(f"opsd_oom_{series}_bytes{{{matcher}}}", f"{who}{{{{pool}}}} {series}")
                    for series in ("predicted_peak", "peak_bound", "observed_peak", "limit")), unit="bytes", width=8),
        Panel("Next batch size", "Planned bytes of the next micro-batch (backlog under the cap in force).", (
            Target(f"opsd_oom_batch_bytes{{{matcher}}}", who + "bytes"),
        ), unit="bytes", width=8),
        Panel("Safe max_rows_per_partition",
              "Largest cap that keeps every pool's OOM risk under the target, against the cap in force.", (
                  Target(f"opsd_oom_safe_max_rows_per_partition{{{matcher}}}", who + "safe"),
                  Target(f"opsd_tuning_max_rows_per_partition{{{matcher}}}", who + "in force"),
              ), unit="suffix:rows"),
        Panel("Safe max_bytes_per_partition",
              "Largest byte cap (YTsaurus data weight per partition) that keeps every pool's OOM risk under the "
              "target whatever the rows' width, against the byte cap in force.", (
                  Target(f"opsd_oom_safe_max_partition_bytes{{{matcher}}}", who + "safe"),
                  Target(f"opsd_tuning_max_partition_bytes{{{matcher}}}", who + "in force"),
              ), unit="bytes"),
        Panel("Memory failures", "Failures whose cause is memory, by the pool the failure blames.", (
            Target(f"sum by (query, pool) (increase(opsd_memory_failures_total{{{matcher}}}[$__rate_interval]))",
                   who + "{{pool}}"),
        ), unit="short"),
    ))


def tuning_row(matcher: str, who: str) -> Row:
    """The live-tuning knobs (in force, recommended, bounds) and the auto-tuner's decisions for the queries ``matcher``
    selects; ``who`` starts each legend."""
    return Row("Live tuning", (
        knob_panel("max_rows_per_partition", "opsd_tuning_max_rows_per_partition", "max_rows_per_partition",
                   "Read limit per partition in force for the query's source (tuning document, else the option)",
                   matcher, who),
        knob_panel("max_bytes_per_partition", "opsd_tuning_max_partition_bytes", "max_bytes_per_partition",
                   "Byte limit per partition in force for the query's source (tuning document, else the option)",
                   matcher, who, unit="bytes"),
        knob_panel("dynBatchSize", "opsd_tuning_dyn_batch_size", "dyn_batch_size",
                   "Rows per insert in force for the query's yt sink (tuning document, else the option or conf)",
                   matcher, who),
        Panel("Auto-tuner decisions", "Changes the auto-tuner decided, by knob, direction and reason (holds "
              "left out); on the pipeline dashboard each is an annotation too.", (
                  Target(f'sum by (query, knob, direction, reason) (increase(opsd_autotune_decisions_total{{{matcher}, '
                         f'direction!="hold"}}[$__rate_interval]))', who + "{{knob}} {{direction}} {{reason}}"),
              ), unit="short", width=8),
        Panel("Decision history appends", "Tuner, heal and replan decisions appended to the query's history table "
              "(`opsd history QUERY` shows them), and appends that failed (logged as history_append_failed; the job "
              "goes on).", (
                  Target(f"sum by (query) (increase(opsd_history_entries_total{{{matcher}}}[$__rate_interval]))",
                         who + "appended"),
                  Target(f"sum by (query) (increase(opsd_history_append_failures_total{{{matcher}}}"
                         f"[$__rate_interval]))", who + "failed"),
              ), unit="short", width=8),
    ))


def knob_panel(title: str, in_force: str, knob: str, description: str, matcher: str, who: str,
               unit: str = "suffix:rows") -> Panel:
    """A live-tuning knob: the value in force, the auto-tuner's recommendation and its bounds."""
    return Panel(title, f"{description}, the auto-tuner's recommendation and its bounds.", (
        Target(f"{in_force}{{{matcher}}}", who + "in force"),
        Target(f'opsd_autotune_recommended{{{matcher}, knob="{knob}"}}', who + "recommended"),
        Target(f'opsd_autotune_bound{{{matcher}, knob="{knob}"}}', who + "{{bound}}"),
    ), unit=unit, width=8)


def trim_row(matcher: str, who: str) -> Row:
    """The queues' trimming as it concerns the queries ``matcher`` selects: the time until unread rows are trimmed,
    and the vital consumers that hold the trimming back."""
    return Row("Queue trimming: auto-trim and vital consumers", (
        Panel("Time until unread rows are trimmed", "Forecast seconds until the queue's @auto_trim_config deletes rows "
              "of the partition the query has not read, at the current rates (0: at the Queue Agent's next pass; "
              "+Inf, not drawn: never). Red under the OpsdRowsTrimmedSoon threshold "
              f"({duration(TRIM_ETA_SHORT_SECONDS)}).", (
                  Target(f"opsd_queue_trim_eta_seconds{{{matcher}}}", who + "{{queue}}/{{partition}}"),
              ), unit="s", width=8, bad_below=TRIM_ETA_SHORT_SECONDS, runbook="OpsdRowsTrimmedSoon"),
        Panel("Vital consumers standing still", "How long each consumer registered as vital for a queue the query "
              "reads (its own or another job's) has not moved while rows wait for it: the queue is not trimmed past "
              "it, for any reader. Red above the OpsdVitalConsumerStalled threshold "
              f"({duration(VITAL_CONSUMER_STALLED_SECONDS)}).", (
                  Target(f"opsd_vital_consumer_stalled_seconds{{{matcher}}}", who + "{{queue}} {{consumer}}"),
              ), unit="s", width=8, bad_above=VITAL_CONSUMER_STALLED_SECONDS, runbook="OpsdVitalConsumerStalled"),
        Panel("Rows waiting for vital consumers", "Rows written past each vital consumer's offsets: rows its queue "
              "cannot trim.", (
                  Target(f"opsd_vital_consumer_waiting_rows{{{matcher}}}", who + "{{queue}} {{consumer}}"),
              ), unit="suffix:rows", width=8),
    ))


def counted_panel(title: str, description: str, counter: str, matcher: str, legend: str, *, unit: str = "short",
                  runbook: str | None = None) -> Panel:
    """A quarter-width panel of a per-query counter's increase over the rate interval."""
    return Panel(title, description, (
        Target(f"sum by (query) (increase({counter}{{{matcher}}}[$__rate_interval]))", legend),
    ), unit=unit, width=6, runbook=runbook)


def producer_row(matcher: str, who: str) -> Row:
    """The queue producer of the queries ``matcher`` selects that write in the sink's producer mode: sessions and their
    epoch bumps, rows skipped as written before, zombie attempts fenced off."""
    return Row("Exactly-once writes: the queue producer", (
        Panel("Producer sessions", "Sessions of the query in its queue producer (one per Spark partition, or per "
              "source tablet in source numbering), and those holding a later batch than the query: its new rows are "
              "skipped as written before until the sessions are removed (`opsd producer remove-sessions`).", (
                  Target(f"opsd_producer_sessions{{{matcher}}}", who + "sessions"),
                  Target(f"opsd_producer_sessions_ahead{{{matcher}}}", who + "ahead of the query"),
              ), unit="short", width=6),
        counted_panel("Epoch bumps", "Sessions opened again: every task start bumps its session's epoch (about one "
                      "per partition and batch; more when tasks are retried).",
                      "opsd_producer_epoch_bumps_total", matcher, who + "bumps"),
        counted_panel("Rows skipped as written before", "Rows a replayed batch's pushes skipped because the session "
                      "already held them: the duplicates exactly-once kept out.",
                      "opsd_producer_skipped_rows_total", matcher, who + "skipped", unit="suffix:rows"),
        counted_panel("Zombie attempts fenced off", "Task attempts whose push was refused for an older epoch after "
                      "Spark ran the task again (lost executors, speculation): no row was duplicated.",
                      "opsd_producer_fenced_zombies_total", matcher, who + "fenced",
                      runbook="OpsdProducerZombieFenced"),
    ))


def overview_rows() -> tuple[Row, ...]:
    """The rows of the opsd overview dashboard, top to bottom in the order an operator triages."""
    return (
        Row("Query health", (
            boolean_panel("Query up", "1 while the streaming query is active.",
                          f"opsd_query_up{{{Q}}}", "up", one_is_good=True),
            boolean_panel("Crash loop", "1 while the restart backoff is at its cap.",
                          f"opsd_query_crash_loop{{{Q}}}", "crash loop"),
            boolean_panel("Stalled", "1 when no progress is made although the sources have backlog.",
                          f"opsd_query_stalled{{{Q}}}", "stalled"),
            boolean_panel("Failed permanently",
                          "1 when opsd stopped the query for good: its failure cannot pass by restarting "
                          "(a config or code error); /status and the log say why.",
                          f"opsd_query_failed_permanently{{{Q}}}", "failed"),
            Panel("Restarts, terminations and failures",
                  "Lifecycle events per interval; failures are split by exception class.", (
                      Target(f"increase(opsd_query_restarts_total{{{Q}}}[$__rate_interval])",
                             "{{query}} restarts"),
                      Target(f"increase(opsd_query_terminations_total{{{Q}}}[$__rate_interval])",
                             "{{query}} terminations"),
                      Target(f"sum by (query, exception) "
                             f"(increase(opsd_query_failures_total{{{Q}}}[$__rate_interval]))",
                             "{{query}} {{exception}}"),
                      Target(f"increase(opsd_claims_lost_total{{{Q}}}[$__rate_interval])",
                             "{{query}} {{kind}} claim lost"),
                  )),
            silence_panel(Q, width=12),
        )),
        Row("Micro-batches", (
            Panel("Batch duration p50 by phase", "Median duration of each micro-batch phase.", (
                Target(quantile(0.5, BATCH_DURATION, "query, phase", Q), "{{query}} {{phase}}"),
            ), unit="s"),
            Panel("Batch duration p95 by phase", "95th percentile duration of each micro-batch phase.", (
                Target(quantile(0.95, BATCH_DURATION, "query, phase", Q), "{{query}} {{phase}}"),
            ), unit="s"),
            Panel("Input vs processed rows/s",
                  "Arrival rate against processing rate of the last batch; input above processed means "
                  "the backlog grows.", (
                      Target(f"opsd_input_rows_per_second{{{Q}}}", "{{query}} input"),
                      Target(f"opsd_processed_rows_per_second{{{Q}}}", "{{query}} processed"),
                  ), unit="suffix:rows/s"),
            Panel("Rows read and written", "Rows per second from the input and output row counters.", (
                Target(f"rate(opsd_input_rows_total{{{Q}}}[$__rate_interval])", "{{query}} read"),
                Target(f"rate(opsd_output_rows_total{{{Q}}}[$__rate_interval])", "{{query}} written"),
            ), unit="suffix:rows/s"),
            Panel("Last batch id", "Id of the last micro-batch that reported progress.", (
                Target(f"opsd_last_batch_id{{{Q}}}", "{{query}}"),
            )),
            phases_panel(Q, width=12),
        )),
        Row("Sources", (
            Panel("Backlog per queue partition", "Rows waiting in each queue partition.", (
                Target(f"opsd_source_backlog_rows{{{Q}}}", "{{query}} {{queue}}/{{partition}}"),
            ), unit="suffix:rows"),
            Panel("Latest vs end offset", "Latest available row index against the end of the last batch.", (
                Target(f"opsd_source_latest_offset{{{Q}}}", "{{query}} {{queue}}/{{partition}} latest"),
                Target(f"opsd_source_end_offset{{{Q}}}", "{{query}} {{queue}}/{{partition}} end"),
            )),
        )),
        lag_row(Q, "{{query}} "),
        trim_row(Q, "{{query}} "),
        Row("Offset desync", (
            Panel("Desync state per partition",
                  "1 for the state of each queue partition: the checkpoint's committed batch against the consumer "
                  "(lagging_one_batch is the documented late acknowledgement of an idle query; "
                  "checkpoint_ahead_of_queue and consumer_ahead_of_queue are offsets past the queue's end).", (
                      Target(f"opsd_desync_state{{{Q}}} == 1", "{{query}} {{queue}}/{{partition}} {{state}}"),
                  ), width=8),
            Panel("Desync rows", "Checkpoint's next row minus the consumer's offset; negative: consumer ahead.", (
                Target(f"opsd_desync_rows{{{Q}}}", "{{query}} {{queue}}/{{partition}}"),
            ), unit="suffix:rows", width=8),
            Panel("Heals", "Heals of lagging consumers per interval, by outcome.", (
                Target(f"sum by (query, outcome) (increase(opsd_desync_heals_total{{{Q}}}[$__rate_interval]))",
                       "{{query}} {{outcome}}"),
            ), width=8),
        )),
        state_row(Q, "{{query}} "),
        producer_row(Q, "{{query}} "),
        tuning_row(Q, "{{query}} "),
        memory_row(Q, "{{query}} "),
        Row("opsd itself", (
            Panel("Check errors", "Runs and failed runs of opsd's periodic checks.", (
                Target("sum by (check) (rate(opsd_check_errors_total[$__rate_interval]))",
                       "{{check}} errors"),
                Target("sum by (check) (rate(opsd_check_runs_total[$__rate_interval]))",
                       "{{check}} runs"),
                Target("sum by (check) (rate(opsd_cycle_step_overruns_total[$__rate_interval]))",
                       "{{check}} overruns"),
            ), unit="ops", width=8),
            Panel("Check duration p95", "95th percentile duration of each periodic check (a step of the cycle: its own "
                  "time) and of the whole cycle of the position checks.", (
                Target(quantile(0.95, "opsd_check_duration_seconds", "check", ""), "{{check}}"),
                Target(quantile(0.95, "opsd_cycle_duration_seconds", "instance", ""),
                       "cycle (read + steps) {{instance}}"),
            ), unit="s", width=8),
            Panel("Listener events", "Streaming listener events received and dropped (queue full).", (
                Target("sum by (event) (rate(opsd_listener_events_total[$__rate_interval]))", "{{event}}"),
                Target("rate(opsd_listener_dropped_events_total[$__rate_interval])", "dropped"),
            ), unit="ops", width=8),
            Panel("Build", "Versions of opsd and PySpark running per instance.", (
                Target("opsd_build_info", instant=True),
            ), kind="table", width=24, height=5),
        )),
    )


def pipeline_rows() -> tuple[Row, ...]:
    """The rows of the per-pipeline drill-down: one query of one opsd, from its state down to its tuning."""
    return (
        Row("State", (
            boolean_panel("Up", "1 while the query is active.", f"opsd_query_up{{{P}}}", "up", one_is_good=True,
                          runbook="OpsdQueryDown"),
            boolean_panel("Crash loop", "1 while the restart backoff is at its cap.",
                          f"opsd_query_crash_loop{{{P}}}", "crash loop", runbook="OpsdQueryCrashLooping"),
            boolean_panel("Stalled", "1 when no progress is made although the sources have backlog; an idle query "
                          "(nothing to read) is not stalled.", f"opsd_query_stalled{{{P}}}", "stalled",
                          runbook="OpsdQueryStalled"),
            boolean_panel("Failed permanently", "1 when opsd stopped the query for good (a config or code error).",
                          f"opsd_query_failed_permanently{{{P}}}", "failed", runbook="OpsdQueryFailedPermanently"),
            silence_panel(P, width=8),
            Panel("Terminations, failures by exception", "Lifecycle events per interval; a claim lost stops opsd.", (
                Target(f"increase(opsd_query_terminations_total{{{P}}}[$__rate_interval])", "{{query}} terminations"),
                Target(f"sum by (query, exception) (increase(opsd_query_failures_total{{{P}}}[$__rate_interval]))",
                       "{{query}} {{exception}}"),
                Target(f"increase(opsd_claims_lost_total{{{P}}}[$__rate_interval])", "{{query}} {{kind}} claim lost"),
            ), width=8, runbook="OpsdQueryFailures"),
            Panel("Last batch id", "Id of the last micro-batch that reported progress.", (
                Target(f"opsd_last_batch_id{{{P}}}", "{{query}}"),
            ), width=8),
        )),
        lag_row(P, ""),
        trim_row(P, ""),
        Row("Offset desync: consumer vs checkpoint", (
            Panel("Desync state per partition", "The state of each partition (1 = in that state): in_sync, "
                  "lagging_one_batch (an idle query's late acknowledgement), stuck, consumer_ahead, behind_trim, "
                  "consumer_ahead_of_queue, checkpoint_ahead_of_queue (offsets past the queue's end: a recreated "
                  "queue).", (
                      Target(f"opsd_desync_state{{{P}}} == 1", "{{queue}}/{{partition}} {{state}}"),
                  ), width=6, runbook="OpsdOffsetDesyncUnsafe"),
            boolean_panel("Offsets past the queue's end", "1 while the checkpoint or the consumer of a partition "
                          "points past the queue's last row (checkpoint_ahead_of_queue, consumer_ahead_of_queue): the "
                          "queue was recreated under its path; never healed, the source refuses to read on.",
                          f'max by (query) (opsd_desync_state{{{P}, state=~"{BEYOND_QUEUE_END}"}})', "past the end",
                          runbook="OpsdOffsetsBeyondQueueEnd"),
            Panel("Checkpoint minus consumer", "The checkpoint's next row minus the consumer's offset, per partition; "
                  "negative: the consumer is ahead (a restart skips rows).", (
                      Target(f"opsd_desync_rows{{{P}}}", "{{queue}}/{{partition}}"),
                  ), unit="suffix:rows", width=6, runbook="OpsdConsumerStuck"),
            Panel("Heals", "Heals of lagging consumers per interval, by outcome (refused_ahead_of_queue: a heal that "
                  "would have moved a consumer past the queue's end).", (
                Target(f"sum by (query, outcome) (increase(opsd_desync_heals_total{{{P}}}[$__rate_interval]))",
                       "{{outcome}}"),
            ), width=6),
        )),
        Row("Micro-batches", (
            Panel("Batch duration p95 by phase", "95th percentile of each phase: addBatch is the work, latestOffset / "
                  "getBatch the source, walCommit / commitOffsets the checkpoint. Red above the OpsdHighBatchDuration "
                  f"threshold ({duration(BATCH_DURATION_HIGH_SECONDS)}).", (
                      Target(quantile(0.95, BATCH_DURATION, "query, phase", P), "{{phase}}"),
                  ), unit="s", bad_above=BATCH_DURATION_HIGH_SECONDS, runbook="OpsdHighBatchDuration"),
            Panel("Input vs processed rows/s", "Arrival rate against processing rate of the last batch.", (
                Target(f"opsd_input_rows_per_second{{{P}}}", "input"),
                Target(f"opsd_processed_rows_per_second{{{P}}}", "processed"),
            ), unit="suffix:rows/s"),
            Panel("Backlog per partition, batch end vs latest", "Rows waiting in each partition as the last batch saw "
                  "them; the last batch's end offset against the latest available one.", (
                      Target(f"opsd_source_backlog_rows{{{P}}}", "{{queue}}/{{partition}} backlog"),
                      Target(f"opsd_source_end_offset{{{P}}}", "{{queue}}/{{partition}} batch end"),
                      Target(f"opsd_source_latest_offset{{{P}}}", "{{queue}}/{{partition}} latest"),
                  ), width=12),
            Panel("Rows read and written", "Rows per second from the input and output row counters.", (
                Target(f"rate(opsd_input_rows_total{{{P}}}[$__rate_interval])", "read"),
                Target(f"rate(opsd_output_rows_total{{{P}}}[$__rate_interval])", "written"),
            ), unit="suffix:rows/s", width=12),
            phases_panel(P, width=24),
        )),
        state_row(P, ""),
        producer_row(P, ""),
        tuning_row(P, ""),
        memory_row(P, ""),
    )


#: The drill-down's annotations: (name, colour, expression that is > 0 at the event).
PIPELINE_ANNOTATIONS = (
    ("Restarts", "orange", f"increase(opsd_query_restarts_total{{{P}}}[2m]) > 0"),
    ("Failures", "red", f"sum by (query) (increase(opsd_query_failures_total{{{P}}}[2m])) > 0"),
    ("Tuning decisions", "blue", f'sum by (query, knob, direction, reason) (increase(opsd_autotune_decisions_total'
                                 f'{{{P}, direction!="hold"}}[2m])) > 0 '
                                 f"or changes(opsd_tuning_max_rows_per_partition{{{P}}}[2m]) > 0 "
                                 f"or changes(opsd_tuning_dyn_batch_size{{{P}}}[2m]) > 0"),
)


def target_json(target: Target, ref_id: str) -> dict:
    """A Prometheus target; instant targets feed tables, which need one row per series."""
    body = {"datasource": DATASOURCE, "expr": target.expr, "legendFormat": target.legend, "refId": ref_id}
    if target.instant:
        body |= {"format": "table", "instant": True, "range": False}
    return body


def panel_options(panel: Panel) -> tuple[dict, dict]:
    """Field defaults and options per panel kind: a state timeline maps 0/1 to words and colours."""
    if panel.states:
        options = {str(value): {"color": color, "index": value, "text": text}
                   for value, (text, color) in enumerate(panel.states)}
        return {"mappings": [{"options": options, "type": "value"}]}, {"showValue": "never"}
    if panel.kind == "table":
        return {}, {"showHeader": True}
    legend = {"calcs": ["lastNotNull", "max"], "displayMode": "table", "placement": "bottom"}
    defaults: dict = {"unit": panel.unit}
    if panel.stacked:
        defaults |= {"custom": {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 70}}
    if panel.bad_above is not None or panel.bad_below is not None:
        low, high, level = ("green", "red", panel.bad_above) if panel.bad_above is not None else \
            ("red", "green", panel.bad_below)
        defaults |= {"thresholds": {"mode": "absolute", "steps": [{"color": low, "value": None},
                                                                  {"color": high, "value": level}]},
                     "custom": {"thresholdsStyle": {"mode": "line"}}}
    return defaults, {"legend": legend, "tooltip": {"mode": "multi", "sort": "desc"}}


def runbook_url(alert: str) -> str:
    """The runbook section of ``alert`` (GitHub's anchor of its heading)."""
    return f"{RUNBOOK_BASE}#{alert.lower()}"


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict:
    """One panel at a grid position."""
    defaults, options = panel_options(panel)
    return {
        "datasource": DATASOURCE,
        "description": panel.description + (f" Runbook: {runbook_url(panel.runbook)}" if panel.runbook else ""),
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "id": panel_id,
        "options": options,
        "targets": [target_json(t, chr(ord("A") + i)) for i, t in enumerate(panel.targets)],
        "title": panel.title,
        "type": panel.kind,
    }


def layout(rows: tuple[Row, ...]) -> Iterator[dict]:
    """Place rows and panels on Grafana's 24-column grid with stable ids, wrapping full lines."""
    panel_id, y = 0, 0
    for row in rows:
        panel_id += 1
        yield {"collapsed": False, "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
               "id": panel_id, "panels": [], "title": row.title, "type": "row"}
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x, y, line_height = 0, y + line_height, 0
            panel_id += 1
            yield panel_json(panel, panel_id, x, y)
            x, line_height = x + panel.width, max(line_height, panel.height)
        y += line_height


DATASOURCE_VARIABLE = {"current": {}, "hide": 0, "label": "Data source", "name": "datasource",
                       "query": "prometheus", "refresh": 1, "regex": "", "type": "datasource"}


def query_variable(name: str, label: str, query: str, *, everything: bool) -> dict:
    """A variable listing the values of a label (``label_values(...)``); ``everything`` adds All (``.*``)."""
    variable = {"current": {}, "datasource": DATASOURCE, "definition": query, "hide": 0, "includeAll": everything,
                "label": label, "multi": everything, "name": name, "query": query, "refresh": 2, "regex": "",
                "sort": 1, "type": "query"}
    return variable | ({"allValue": ".*"} if everything else {})


def templating() -> dict:
    """The data source and query variables; `query` lists every query opsd reports on."""
    query = query_variable("query", "Query", "label_values(opsd_query_up, query)", everything=True)
    return {"list": [DATASOURCE_VARIABLE, query]}


def pipeline_templating() -> dict:
    """Data source, then namespace, instance and pipeline, each narrowed by the ones before it."""
    return {"list": [
        DATASOURCE_VARIABLE,
        query_variable("namespace", "Namespace", "label_values(opsd_build_info, namespace)", everything=True),
        query_variable("instance", "opsd", 'label_values(opsd_build_info{namespace=~"$namespace"}, instance)',
                       everything=True),
        query_variable("pipeline", "Pipeline",
                       'label_values(opsd_query_up{namespace=~"$namespace", instance=~"$instance"}, query)',
                       everything=False),
    ]}


def annotation_json(name: str, color: str, expr: str) -> dict:
    return {"datasource": DATASOURCE, "enable": True, "expr": expr, "iconColor": color, "name": name,
            "step": "30s", "titleFormat": name, "useValueForTime": False}


def dashboard_json(uid: str, title: str, description: str, rows: tuple[Row, ...], templating_list: dict, *,
                   annotations: list[dict] | None = None, links: list[dict] | None = None) -> dict:
    """A dashboard of ``rows`` with the settings every opsd dashboard shares."""
    return {
        "annotations": {"list": annotations or []},
        "description": description,
        "editable": True,
        "graphTooltip": 1,
        "links": links or [],
        "panels": list(layout(rows)),
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["opsd", "spark", "ytsaurus"],
        "templating": templating_list,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
    }


def overview() -> dict:
    """The opsd overview dashboard: one screen from "is it up" down to opsd's own health."""
    return dashboard_json("opsd-overview", "opsd overview",
                          "Streaming queries run by opsd: health, micro-batches, backlog, state, tuning.",
                          overview_rows(), templating())


def pipeline() -> dict:
    """The per-pipeline drill-down: one query of one opsd, with restarts, failures and tuning as annotations."""
    return dashboard_json(
        "opsd-pipeline", "opsd pipeline", "One streaming query of one opsd: state, backlog and lag per partition, "
        "offset desync, micro-batches, tuning.", pipeline_rows(), pipeline_templating(),
        annotations=[annotation_json(*item) for item in PIPELINE_ANNOTATIONS],
        links=[{"title": "opsd overview", "type": "link", "url": "/d/opsd-overview"}])


DASHBOARDS = {"opsd-overview.json": overview, "opsd-pipeline.json": pipeline}


def expressions(dashboard: dict) -> Iterator[str]:
    """Every PromQL expression of a dashboard's panels and annotations."""
    for panel in dashboard["panels"]:
        yield from (target["expr"] for target in panel.get("targets", []))
    yield from (annotation["expr"] for annotation in dashboard["annotations"]["list"])


def variable_sources(dashboard: dict) -> Iterator[tuple[str, str]]:
    """(metric, label) of each ``label_values(metric, label)`` variable query (Grafana, not PromQL)."""
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            metric, label = _LABEL_VALUES.fullmatch(variable["query"]).groups()
            yield metric, label


def problems(dashboard: dict) -> Iterator[str]:
    """Each expression or variable that queries a metric or label opsd does not export."""
    for expr in expressions(dashboard):
        if unknown_metrics(expr) or unknown_labels(expr):
            yield f"{expr!r}: unknown metrics {sorted(unknown_metrics(expr))}, labels {unknown_labels(expr)}"
    series = defined_series()
    for metric, label in variable_sources(dashboard):
        if metric not in series or label not in (*series[metric].labels, *SCRAPE_LABELS):
            yield f"variable label_values({metric}, {label}): no such metric or label"


def check(dashboard: dict) -> None:
    """Refuse a dashboard that queries a metric or label opsd does not export.

    Raises:
        ValueError: naming each offending expression.
    """
    if found := list(problems(dashboard)):
        raise ValueError("dashboard uses undefined metrics or labels:\n" + "\n".join(found))


def render(dashboard: dict) -> str:
    """Serialise deterministically, so an unchanged dashboard gives an unchanged file."""
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"


def build() -> dict[str, str]:
    """File name to JSON text of every dashboard, each checked against the metric definitions."""
    built = {}
    for filename, make in DASHBOARDS.items():
        dashboard = make()
        check(dashboard)
        built[filename] = render(dashboard)
    return built


def main() -> None:
    """Write every dashboard into each output directory."""
    for filename, text in build().items():
        for directory in OUTPUT_DIRS:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / filename).write_text(text)


if __name__ == "__main__":
    main()

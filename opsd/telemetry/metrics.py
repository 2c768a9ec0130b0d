"""The single definition of every Prometheus metric that opsd exports.

Dashboards, alert rules and tests read :data:`METRIC_DEFINITIONS`; code records values through
:class:`Metrics`. Keeping both in one module is what lets a test prove that dashboards and alerts only
use metrics that exist (architecture: "Metrics").

Conventions: prefix ``opsd_``, base units (seconds, bytes), counters end in ``_total``, labels carry
the query name and queue / partition — never an application id inside a name.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from prometheus_client import CollectorRegistry

from opsd.telemetry.families import Family
from streaming_core.version import __version__, distribution_version


class MetricType(StrEnum):
    """Prometheus metric types used by opsd."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True)
class MetricDefinition:
    """One exported metric: the full exposition name (counters include ``_total``)."""

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...] = ()
    unit: str = ""
    buckets: tuple[float, ...] = ()


# Micro-batch phases range from milliseconds (walCommit) to many minutes (a large addBatch).
BATCH_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Periodic checks are expected to be fast; the long buckets exist to show a slow cluster.
CHECK_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_Q = ("query",)
_QP = ("query", "queue", "partition")
_QPOOL = ("query", "pool")
_C, _G, _H = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM

METRIC_DEFINITIONS: tuple[MetricDefinition, ...] = (
    MetricDefinition(
        "opsd_build_info", _G,
        "opsd build information; always 1.",
        ("version", "pyspark_version"),
    ),
    # Micro-batch progress.
    MetricDefinition(
        "opsd_batch_duration_seconds", _H,
        "Duration of each micro-batch phase (a key of the progress durationMs).",
        ("query", "phase"), "seconds", BATCH_DURATION_BUCKETS,
    ),
    MetricDefinition(
        "opsd_batch_time_seconds_total", _C,
        "Seconds of the query's measured micro-batches spent in each phase: planning, worker_start, read_wait, "
        "decode, transform, sink_insert, commit, acknowledge, spark_other (they add up to the batches' durations).",
        ("query", "phase"), "seconds",
    ),
    MetricDefinition("opsd_input_rows_total", _C, "Rows read by the query's sources.", _Q, "rows"),
    MetricDefinition(
        "opsd_output_rows_total", _C,
        "Rows written by the query's sink (when the sink reports them).",
        _Q, "rows",
    ),
    MetricDefinition(
        "opsd_input_rows_per_second", _G,
        "Rate at which rows arrived during the last micro-batch.",
        _Q,
    ),
    MetricDefinition(
        "opsd_processed_rows_per_second", _G,
        "Rate at which the last micro-batch processed rows.",
        _Q,
    ),
    MetricDefinition("opsd_last_batch_id", _G, "Id of the last micro-batch that reported progress.", _Q),
    MetricDefinition(
        "opsd_last_progress_timestamp_seconds", _G,
        "Unix time of the last progress event.",
        _Q, "seconds",
    ),
    MetricDefinition(
        "opsd_last_heard_timestamp_seconds", _G,
        "Unix time opsd last heard from the query: a progress or an idle event (an idle query is heard, not stalled).",
        _Q, "seconds",
    ),
    # Query lifecycle.
    MetricDefinition("opsd_query_up", _G, "1 while the query is active, 0 once stopped or failed.", _Q),
    MetricDefinition(
        "opsd_query_terminations_total", _C,
        "Times the query terminated (stopped or failed).",
        _Q,
    ),
    MetricDefinition(
        "opsd_query_failures_total", _C,
        "Times the query failed, by exception class.",
        ("query", "exception"),
    ),
    MetricDefinition("opsd_query_restarts_total", _C, "Times opsd restarted the query after a failure.", _Q),
    MetricDefinition(
        "opsd_claims_lost_total", _C,
        "Claims on YTsaurus (a checkpoint location's or a consumer's) that the pipeline lost while opsd ran: the "
        "claim's transaction expired or was aborted, so another opsd may hold it; opsd stops.",
        ("query", "kind"),
    ),
    MetricDefinition(
        "opsd_query_crash_loop", _G,
        "1 while the query's restart backoff is at its cap (a crash loop).",
        _Q,
    ),
    MetricDefinition(
        "opsd_query_failed_permanently", _G,
        "1 when opsd stopped the query for good: its failure cannot pass by restarting (see /status for why).",
        _Q,
    ),
    MetricDefinition(
        "opsd_query_stalled", _G,
        "1 when the watchdog sees no progress while the sources have backlog.",
        _Q,
    ),
    # Stateful operators and event time.
    MetricDefinition(
        "opsd_state_rows", _G,
        "Rows held by a stateful operator (numRowsTotal).",
        ("query", "operator"), "rows",
    ),
    MetricDefinition(
        "opsd_state_memory_bytes", _G,
        "Memory used by a stateful operator's state store.",
        ("query", "operator"), "bytes",
    ),
    MetricDefinition(
        "opsd_watermark_delay_seconds", _G,
        "Progress time minus the event-time watermark.",
        _Q, "seconds",
    ),
    # Sources (yt queues): offsets are the last row index already read, -1 when nothing was read.
    MetricDefinition(
        "opsd_source_latest_offset", _G,
        "Latest available row index of a queue partition seen by the source.",
        _QP,
    ),
    MetricDefinition(
        "opsd_source_end_offset", _G,
        "Row index up to which the last micro-batch read a queue partition.",
        _QP,
    ),
    MetricDefinition(
        "opsd_source_backlog_rows", _G,
        "Rows waiting in a queue partition (latest minus end offset).",
        _QP, "rows",
    ),
    # Offset desync: the checkpoint's newest committed batch against the consumer (opsd.checks.desync).
    MetricDefinition(
        "opsd_desync_rows", _G,
        "The checkpoint's next row minus the consumer's offset: rows the consumer lags the committed batch "
        "(negative when the consumer is ahead of the checkpoint).",
        _QP, "rows",
    ),
    MetricDefinition(
        "opsd_desync_state", _G,
        "1 for the partition's desync state (in_sync, lagging_one_batch, stuck, consumer_ahead, behind_trim, "
        "consumer_ahead_of_queue, checkpoint_ahead_of_queue), 0 for the state it left.",
        (*_QP, "state"),
    ),
    MetricDefinition(
        "opsd_desync_heals_total", _C,
        "Heals of a lagging consumer, by outcome (healed, nothing_to_heal, conflict, refused_*).",
        ("query", "queue", "outcome"),
    ),
    # Backlog and lag read from the cluster (opsd.checks.lag), beside the progress-reported backlog above.
    MetricDefinition(
        "opsd_queue_unread_rows", _G,
        "Rows of a queue partition the query has not read: the queue's end minus the next row to read.",
        _QP, "rows",
    ),
    MetricDefinition(
        "opsd_queue_lag_seconds", _G,
        "Age of the next row to read ($timestamp, else the sampled offset-to-time history); 0 when nothing is "
        "unread.",
        _QP, "seconds",
    ),
    MetricDefinition(
        "opsd_queue_input_rows_per_second", _G,
        "Rows written to the query's queues per second, averaged over the lag window.",
        _Q,
    ),
    MetricDefinition(
        "opsd_queue_read_rows_per_second", _G,
        "Rows the query moved past per second (next row to read), averaged over the lag window.",
        _Q,
    ),
    MetricDefinition(
        "opsd_time_to_drain_seconds", _G,
        "Backlog / (read rate - input rate): when the backlog is gone at the current rates; +Inf when it is not "
        "draining.",
        _Q, "seconds",
    ),
    # Queue Agent signals (opsd.checks.queue_agent): YTsaurus' Queue Agent's where it serves them, else opsd's own.
    MetricDefinition(
        "opsd_queue_agent_served", _G,
        "1 when YTsaurus' Queue Agent serves the queue's signals below, 0 when opsd's own measurements stand in.",
        ("query", "queue"),
    ),
    MetricDefinition(
        "opsd_queue_write_rows_per_second", _G,
        "Rows written to a queue partition per second (the Queue Agent's one-minute rate, else opsd's between two "
        "readings).",
        _QP,
    ),
    MetricDefinition(
        "opsd_consumer_unread_rows", _G,
        "Rows of a queue partition past the query's consumer offset (the Queue Agent's unread_row_count).",
        _QP, "rows",
    ),
    MetricDefinition(
        "opsd_consumer_processing_lag_seconds", _G,
        "Age of the consumer's next row (the Queue Agent's processing_lag, else the lag check's lag).",
        _QP, "seconds",
    ),
    MetricDefinition(
        "opsd_consumer_disposition", _G,
        "1 for where the consumer's offset stands in the partition (up_to_date, pending_consumption, expired, ahead), "
        "0 for the disposition it left.",
        (*_QP, "disposition"),
    ),
    # The queue's trimming (opsd.checks.trim, opsd.checks.vital): @auto_trim_config and vital consumers.
    MetricDefinition(
        "opsd_queue_trim_eta_seconds", _G,
        "Forecast seconds until the queue's automatic trimming (@auto_trim_config, as the Queue Agent trims) deletes "
        "rows of the partition the query has not read: 0 = now; +Inf = never at the current rates (no auto-trim, no "
        "vital consumer, the query's consumer vital, or the trim point not approaching); absent until known.",
        _QP, "seconds",
    ),
    MetricDefinition(
        "opsd_vital_consumer_stalled_seconds", _G,
        "How long a consumer registered as vital for a queue the query reads (its own or another job's) has stood "
        "still while rows wait for it, holding back the queue's trimming for every reader; 0 while it advances or "
        "nothing waits.",
        ("query", "queue", "consumer"), "seconds",
    ),
    MetricDefinition(
        "opsd_vital_consumer_waiting_rows", _G,
        "Rows written past the offsets of a consumer registered as vital for a queue the query reads: rows the "
        "queue cannot trim.",
        ("query", "queue", "consumer"), "rows",
    ),
    # The sink's producer mode (opsd.checks.producers): the query's sessions in its queue producer.
    MetricDefinition(
        "opsd_producer_sessions", _G,
        "Sessions of the query in the queue producer its yt sink writes through (one per partition or source tablet).",
        _Q,
    ),
    MetricDefinition(
        "opsd_producer_epoch_bumps_total", _C,
        "Epochs of the query's producer sessions bumped: each task start opens its session again (the sum of the "
        "sessions' epochs, counted as it grows).",
        _Q,
    ),
    MetricDefinition(
        "opsd_producer_skipped_rows_total", _C,
        "Rows the query's pushes skipped as written before (a batch replayed after a failure or a restart).",
        _Q, "rows",
    ),
    MetricDefinition(
        "opsd_producer_fenced_zombies_total", _C,
        "Task attempts of the query whose push was refused for an older epoch: a zombie fenced off after Spark ran "
        "the task again (lost executor, speculation); no row was duplicated.",
        _Q,
    ),
    MetricDefinition(
        "opsd_producer_sessions_ahead", _G,
        "Producer sessions of the query holding a later batch than the query: its new rows are skipped as written "
        "before (its batch ids began again under the same session names).",
        _Q,
    ),
    # Live tuning.
    MetricDefinition(
        "opsd_tuning_max_rows_per_partition", _G,
        "Current max_rows_per_partition read limit of the query.",
        _Q,
    ),
    MetricDefinition(
        "opsd_tuning_max_partition_bytes", _G,
        "Current max_bytes_per_partition read limit of the query (YTsaurus data weight per partition and batch).",
        _Q, "bytes",
    ),
    MetricDefinition("opsd_tuning_dyn_batch_size", _G, "Current dynBatchSize of the query's yt sink.", _Q),
    MetricDefinition(
        "opsd_autotune_recommended", _G,
        "The auto-tuner's latest recommended value of a knob (max_rows_per_partition, max_bytes_per_partition, "
        "dyn_batch_size); applied "
        "in mode apply, only shown in mode recommend.",
        ("query", "knob"),
    ),
    MetricDefinition(
        "opsd_autotune_bound", _G,
        "The auto-tuner's configured lower (bound=min) and upper (bound=max) bound of a knob.",
        ("query", "knob", "bound"),
    ),
    MetricDefinition(
        "opsd_autotune_decisions_total", _C,
        "Auto-tuner decisions by knob (max_rows_per_partition, max_bytes_per_partition, dyn_batch_size; "
        "planned_batch: a failed run's "
        "batch planned again, or not), direction (up, down, hold) and reason.",
        ("query", "knob", "direction", "reason"),
    ),
    # The decision history (opsd.stores.history): decisions kept in the cluster, and appends that failed.
    MetricDefinition(
        "opsd_history_entries_total", _C,
        "Tuner, heal and replan decisions appended to the query's history table.",
        _Q,
    ),
    MetricDefinition(
        "opsd_history_append_failures_total", _C,
        "Decisions that could not be appended to the query's history table (logged as history_append_failed; the "
        "job goes on).",
        _Q,
    ),
    # OOM risk of the next micro-batch, per memory pool (jvm_heap, direct, python_worker, driver_result).
    MetricDefinition(
        "opsd_oom_risk", _G,
        "Upper bound of the next micro-batch's peak (at checks.oom_confidence) over the pool's limit; 1.0 = may run "
        "out of memory.",
        _QPOOL,
    ),
    MetricDefinition(
        "opsd_oom_predicted_peak_bytes", _G,
        "Expected memory peak of the next micro-batch in the pool (baseline + growth fitted on the batch's bytes).",
        _QPOOL, "bytes",
    ),
    MetricDefinition(
        "opsd_oom_peak_bound_bytes", _G,
        "Upper bound of the next micro-batch's memory peak in the pool at checks.oom_confidence: noisy or few "
        "observations widen it.",
        _QPOOL, "bytes",
    ),
    MetricDefinition(
        "opsd_oom_exceed_probability", _G,
        "The model's probability that the next micro-batch's peak passes the pool's limit.",
        _QPOOL,
    ),
    MetricDefinition("opsd_oom_limit_bytes", _G, "Memory limit of the pool (from the Spark conf).", _QPOOL, "bytes"),
    MetricDefinition(
        "opsd_oom_observed_peak_bytes", _G,
        "Memory peak Spark measured in the pool during the last observed micro-batch.",
        _QPOOL, "bytes",
    ),
    MetricDefinition(
        "opsd_oom_batch_bytes", _G,
        "Planned size of the next micro-batch (rows under the cap in force x bytes per queue row).",
        _Q, "bytes",
    ),
    MetricDefinition(
        "opsd_oom_safe_max_rows_per_partition", _G,
        "Largest max_rows_per_partition that keeps the OOM risk of every pool under the target.",
        _Q,
    ),
    MetricDefinition(
        "opsd_oom_safe_max_partition_bytes", _G,
        "Largest max_bytes_per_partition (YTsaurus data weight) that keeps the OOM risk of every pool under the "
        "target.",
        _Q, "bytes",
    ),
    MetricDefinition(
        "opsd_memory_failures_total", _C,
        "Times the query failed for lack of memory, by the pool the failure blames.",
        _QPOOL,
    ),
    # The exporter's own health.
    MetricDefinition(
        "opsd_listener_events_total", _C,
        "Streaming listener events received, by kind.",
        ("event",),
    ),
    MetricDefinition(
        "opsd_listener_dropped_events_total", _C,
        "Listener events lost: queue full, or the event could not be read or recorded.",
    ),
    MetricDefinition("opsd_check_runs_total", _C, "Runs of a periodic check.", ("check",)),
    MetricDefinition("opsd_check_errors_total", _C, "Runs of a periodic check that raised.", ("check",)),
    MetricDefinition(
        "opsd_check_duration_seconds", _H,
        "Duration of a periodic check run (a step of the cycle: its own time).",
        ("check",), "seconds", CHECK_DURATION_BUCKETS,
    ),
    MetricDefinition(
        "opsd_cycle_duration_seconds", _H,
        "Duration of one cycle of the position checks: the one read of where queries stand, then each step due.",
        (), "seconds", CHECK_DURATION_BUCKETS,
    ),
    MetricDefinition(
        "opsd_cycle_step_overruns_total", _C,
        "Steps of the cycle that outran its interval (left to finish on their own thread) or were skipped because "
        "their previous run still ran.",
        ("check",),
    ),
)


def _create(definition: MetricDefinition, registry: CollectorRegistry) -> Family:
    """Register one metric as a text-cached family (see `opsd.telemetry.families` for why not prometheus_client's)."""
    return Family(definition.name, definition.type.value, definition.help, definition.labels, definition.buckets,
                  registry=registry, unit=definition.unit)


class Metrics:
    """All opsd metrics registered in one registry.

    Attribute names are the metric names without ``opsd_`` (and without ``_total`` for counters).
    Tests pass a fresh ``CollectorRegistry()``; the daemon passes the default registry or its own.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        made = {d.name: _create(d, registry) for d in METRIC_DEFINITIONS}
        self.families: tuple[Family, ...] = tuple(made.values())
        self.build_info: Family = made["opsd_build_info"]
        self.batch_duration_seconds: Family = made["opsd_batch_duration_seconds"]
        self.batch_time_seconds: Family = made["opsd_batch_time_seconds_total"]
        self.input_rows: Family = made["opsd_input_rows_total"]
        self.output_rows: Family = made["opsd_output_rows_total"]
        self.input_rows_per_second: Family = made["opsd_input_rows_per_second"]
        self.processed_rows_per_second: Family = made["opsd_processed_rows_per_second"]
        self.last_batch_id: Family = made["opsd_last_batch_id"]
        self.last_progress_timestamp_seconds: Family = made["opsd_last_progress_timestamp_seconds"]
        self.last_heard_timestamp_seconds: Family = made["opsd_last_heard_timestamp_seconds"]
        self.query_up: Family = made["opsd_query_up"]
        self.query_terminations: Family = made["opsd_query_terminations_total"]
        self.query_failures: Family = made["opsd_query_failures_total"]
        self.query_restarts: Family = made["opsd_query_restarts_total"]
        self.claims_lost: Family = made["opsd_claims_lost_total"]
        self.query_crash_loop: Family = made["opsd_query_crash_loop"]
        self.query_failed_permanently: Family = made["opsd_query_failed_permanently"]
        self.query_stalled: Family = made["opsd_query_stalled"]
        self.state_rows: Family = made["opsd_state_rows"]
        self.state_memory_bytes: Family = made["opsd_state_memory_bytes"]
        self.watermark_delay_seconds: Family = made["opsd_watermark_delay_seconds"]
        self.source_latest_offset: Family = made["opsd_source_latest_offset"]
        self.source_end_offset: Family = made["opsd_source_end_offset"]
        self.source_backlog_rows: Family = made["opsd_source_backlog_rows"]
        self.desync_rows: Family = made["opsd_desync_rows"]
        self.desync_state: Family = made["opsd_desync_state"]
        self.desync_heals: Family = made["opsd_desync_heals_total"]
        self.queue_unread_rows: Family = made["opsd_queue_unread_rows"]
        self.queue_lag_seconds: Family = made["opsd_queue_lag_seconds"]
        self.queue_input_rows_per_second: Family = made["opsd_queue_input_rows_per_second"]
        self.queue_read_rows_per_second: Family = made["opsd_queue_read_rows_per_second"]
        self.time_to_drain_seconds: Family = made["opsd_time_to_drain_seconds"]
        self.queue_agent_served: Family = made["opsd_queue_agent_served"]
        self.queue_write_rows_per_second: Family = made["opsd_queue_write_rows_per_second"]
        self.consumer_unread_rows: Family = made["opsd_consumer_unread_rows"]
        self.consumer_processing_lag_seconds: Family = made["opsd_consumer_processing_lag_seconds"]
        self.consumer_disposition: Family = made["opsd_consumer_disposition"]
        self.queue_trim_eta_seconds: Family = made["opsd_queue_trim_eta_seconds"]
        self.vital_consumer_stalled_seconds: Family = made["opsd_vital_consumer_stalled_seconds"]
        self.vital_consumer_waiting_rows: Family = made["opsd_vital_consumer_waiting_rows"]
        self.producer_sessions: Family = made["opsd_producer_sessions"]
        self.producer_epoch_bumps: Family = made["opsd_producer_epoch_bumps_total"]
        self.producer_skipped_rows: Family = made["opsd_producer_skipped_rows_total"]
        self.producer_fenced_zombies: Family = made["opsd_producer_fenced_zombies_total"]
        self.producer_sessions_ahead: Family = made["opsd_producer_sessions_ahead"]
        self.tuning_max_rows_per_partition: Family = made["opsd_tuning_max_rows_per_partition"]
        self.tuning_max_partition_bytes: Family = made["opsd_tuning_max_partition_bytes"]
        self.tuning_dyn_batch_size: Family = made["opsd_tuning_dyn_batch_size"]
        self.autotune_recommended: Family = made["opsd_autotune_recommended"]
        self.autotune_bound: Family = made["opsd_autotune_bound"]
        self.autotune_decisions: Family = made["opsd_autotune_decisions_total"]
        self.history_entries: Family = made["opsd_history_entries_total"]
        self.history_append_failures: Family = made["opsd_history_append_failures_total"]
        self.oom_risk: Family = made["opsd_oom_risk"]
        self.oom_predicted_peak_bytes: Family = made["opsd_oom_predicted_peak_bytes"]
        self.oom_peak_bound_bytes: Family = made["opsd_oom_peak_bound_bytes"]
        self.oom_exceed_probability: Family = made["opsd_oom_exceed_probability"]
        self.oom_limit_bytes: Family = made["opsd_oom_limit_bytes"]
        self.oom_observed_peak_bytes: Family = made["opsd_oom_observed_peak_bytes"]
        self.oom_batch_bytes: Family = made["opsd_oom_batch_bytes"]
        self.oom_safe_max_rows_per_partition: Family = made["opsd_oom_safe_max_rows_per_partition"]
        self.oom_safe_max_partition_bytes: Family = made["opsd_oom_safe_max_partition_bytes"]
        self.memory_failures: Family = made["opsd_memory_failures_total"]
        self.listener_events: Family = made["opsd_listener_events_total"]
        self.listener_dropped_events: Family = made["opsd_listener_dropped_events_total"]
        self.check_runs: Family = made["opsd_check_runs_total"]
        self.check_errors: Family = made["opsd_check_errors_total"]
        self.check_duration_seconds: Family = made["opsd_check_duration_seconds"]
        self.cycle_duration_seconds: Family = made["opsd_cycle_duration_seconds"]
        self.cycle_step_overruns: Family = made["opsd_cycle_step_overruns_total"]
        self.build_info.labels(version=__version__, pyspark_version=distribution_version("pyspark")).set(1)

    def render(self) -> bytes:
        """All metrics in the Prometheus text format: what `/metrics` serves."""
        return "".join(f.text() for f in self.families).encode()


"""The recorder: applies query events and runner/check observations to the metrics and the status store.

This is the only place that turns observations into metric values and status fields, so the
listener, the runner (restarts), the watchdog and the tuner all report through one object and the
two views can never disagree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import singledispatchmethod
from typing import TYPE_CHECKING

import structlog

from opsd.observe.events import (
    QueryEvent,
    QueryIdle,
    QueryProgressed,
    QueryStarted,
    QueryTerminated,
)
from opsd.observe.failures import failure_message
from opsd.observe.phases import BatchPhases, PhaseShares
from opsd.observe.progress import BatchProgress
from opsd.observe.status import RECENT_BATCHES, QueryStatus, StatusStore, jsonable
from opsd.results.autotune import Direction, ReplanRefusal, TunerDecision, TuneReason
from opsd.results.cycle import CycleTrace, StepOutcome
from opsd.results.desync import DesyncEntry, Heal, HealOutcome, QueueDesync
from opsd.results.lag import QueryLag
from opsd.results.oom import OomVerdict
from opsd.results.positions import QueryPositions
from opsd.results.producers import ProducerCounts, ProducerReport
from opsd.results.queue_agent import QueueSignals
from opsd.results.trim import QueueTrim
from opsd.results.vital import VitalConsumerAudit
from opsd.telemetry.logs import TRACES_LOGGER
from opsd.telemetry.metrics import Metrics

if TYPE_CHECKING:
    from streaming_core.producer_fences import Fence

log = structlog.get_logger(__name__)
traces = structlog.get_logger(TRACES_LOGGER)


#: The families the listener writes per queue from progress events (not from the cycle's reading).
PROGRESS_FAMILIES = "opsd_source_"


class Recorder:
    """Records events into :class:`Metrics` and :class:`StatusStore`.

    Notes
    -----
    Called from the listener's consumer thread and from scheduler / runner threads; it holds no
    state of its own (metrics and the store are thread-safe). ``clock`` returns unix seconds and is
    injectable for tests.
    """

    def __init__(
        self, metrics: Metrics, status: StatusStore, clock: Callable[[], float] = time.time
    ) -> None:
        self.metrics = metrics
        self.status = status
        self.clock = clock

    @singledispatchmethod
    def record(self, event: QueryEvent) -> None:
        """Apply one listener event."""
        raise TypeError(f"not a query event: {type(event).__name__}")

    @record.register
    def _started(self, event: QueryStarted) -> None:
        name = event.name or event.id
        self.status.update(
            name,
            id=event.id,
            run_id=event.run_id,
            active=True,
            started_at=self.clock(),
            terminated_at=None,
            exception=None,
            exception_class=None,
            error=None,
            stalled=False,
        )
        self.metrics.query_up.labels(query=name).set(1)
        self._counters_from_zero(name)
        log.info("query_started", query=name, query_id=event.id, run_id=event.run_id)

    @record.register
    def _progressed(self, event: QueryProgressed) -> None:
        progress = event.progress
        now = self.clock()
        summary = progress.summary()
        previous = self.status.get(progress.query)
        recent = (*(previous.recent_batches if previous else ())[-(RECENT_BATCHES - 1):], summary)
        self.status.update(
            progress.query,
            id=progress.id,
            run_id=progress.run_id,
            active=True,
            last_batch_id=progress.batch_id,
            last_progress_at=now,
            last_heartbeat_at=now,
            last_progress=summary,
            recent_batches=recent,
            backlog_rows=progress.backlog_rows,
            partitions=progress.partitions,
        )
        self._export_progress(progress)
        self.metrics.last_heard_timestamp_seconds.labels(query=progress.query).set(now)
        log.info(
            "batch_completed",
            query=progress.query,
            batch_id=progress.batch_id,
            rows=progress.num_input_rows,
            duration_seconds=progress.durations_seconds.get("triggerExecution"),
            backlog_rows=progress.backlog_rows,
        )

    @record.register
    def _idle(self, event: QueryIdle) -> None:
        if not self.status.knows_id(event.id):
            # Idle events carry no name: filing one under its id would make a ghost query next to the real one.
            log.debug("idle_event_of_unknown_query", query_id=event.id)
            return
        name = self.status.name_for(event.id)
        now = self.clock()
        self.status.update(name, id=event.id, run_id=event.run_id, active=True, last_heartbeat_at=now)
        self.metrics.query_up.labels(query=name).set(1)
        self.metrics.last_heard_timestamp_seconds.labels(query=name).set(now)

    @record.register
    def _terminated(self, event: QueryTerminated) -> None:
        name = self.status.name_for(event.id)
        exception_class = event.exception_class
        error = None if event.exception is None else failure_message(event.exception)
        self.status.update(
            name,
            active=False,
            terminated_at=self.clock(),
            exception=event.exception,
            exception_class=exception_class,
            error=error,
        )
        self.metrics.query_up.labels(query=name).set(0)
        self.metrics.query_terminations.labels(query=name).inc()
        if exception_class is None:
            log.info("query_terminated", query=name, query_id=event.id)
            return
        self.metrics.query_failures.labels(query=name, exception=exception_class).inc()
        # One line names the failure (the product's error and what it was about); Spark's whole text (Java stack,
        # Python traceback) follows at DEBUG, once: Spark's own lines about the failed task are held back.
        log.warning(
            "query_failed",
            query=name,
            query_id=event.id,
            exception_class=exception_class,
            error_class=event.error_class,
            error=error,
        )
        traces.debug("query_failure_trace", query=name, query_id=event.id, exception=event.exception)

    def _export_progress(self, progress: BatchProgress) -> None:
        m, query = self.metrics, progress.query
        m.query_up.labels(query=query).set(1)
        m.input_rows.labels(query=query).inc(progress.num_input_rows)
        if progress.sink_output_rows is not None:
            m.output_rows.labels(query=query).inc(progress.sink_output_rows)
        if progress.input_rows_per_second is not None:
            m.input_rows_per_second.labels(query=query).set(progress.input_rows_per_second)
        if progress.processed_rows_per_second is not None:
            m.processed_rows_per_second.labels(query=query).set(progress.processed_rows_per_second)
        m.last_batch_id.labels(query=query).set(progress.batch_id)
        m.last_progress_timestamp_seconds.labels(query=query).set(progress.timestamp)
        for phase, seconds in progress.durations_seconds.items():
            m.batch_duration_seconds.labels(query=query, phase=phase).observe(seconds)
        for op in progress.state_operators:
            m.state_rows.labels(query=query, operator=op.name).set(op.num_rows_total)
            m.state_memory_bytes.labels(query=query, operator=op.name).set(op.memory_used_bytes)
        if progress.watermark_delay_seconds is not None:
            m.watermark_delay_seconds.labels(query=query).set(progress.watermark_delay_seconds)
        for part in progress.partitions:
            labels = {"query": query, "queue": part.queue, "partition": str(part.partition)}
            if part.latest is not None:
                m.source_latest_offset.labels(**labels).set(part.latest)
            if part.end is not None:
                m.source_end_offset.labels(**labels).set(part.end)
            if part.backlog_rows is not None:
                m.source_backlog_rows.labels(**labels).set(part.backlog_rows)

    def record_running(self, name: str | None, query_id: str, run_id: str) -> None:
        """A query that was already running when opsd attached (it saw no start event for it)."""
        self.status.update(name or query_id, id=query_id, run_id=run_id, active=True, started_at=self.clock())
        self.metrics.query_up.labels(query=name or query_id).set(1)
        self._counters_from_zero(name or query_id)

    def register(self, query: str, trigger_interval_seconds: float | None = None) -> None:
        """Make a pipeline known before it starts, so readiness waits for it."""
        self.status.update(query, trigger_interval_seconds=trigger_interval_seconds, permanent_failure=None)
        self.metrics.query_up.labels(query=query).set(0)
        self.metrics.query_failed_permanently.labels(query=query).set(0)
        self._counters_from_zero(query)

    def _counters_from_zero(self, query: str) -> None:
        """Make the query's lifecycle counters and state gauges exist from its start, at 0 unless already set:
        Prometheus' increase() over a counter whose first sample is already 1 is 0, so an alert on the first restart
        or termination would never fire, and a state panel (crash loop, stalled) would read "No data" for a healthy
        query. (Failures are labelled by an exception class not known in advance; their alert handles new series.)"""
        m = self.metrics
        for family in (m.query_restarts, m.query_terminations, m.query_crash_loop, m.query_stalled,
                       m.query_failed_permanently):
            family.labels(query=query)

    def record_restart(self, query: str, *, crash_loop: bool) -> None:
        """The runner restarted a failed query; ``crash_loop`` when its backoff is at the cap."""
        current = self.status.get(query)
        restarts = (current.restarts if current else 0) + 1
        self.status.update(query, restarts=restarts)
        self.metrics.query_restarts.labels(query=query).inc()
        self.record_crash_loop(query, crash_loop)
        log.warning("query_restarted", query=query, restarts=restarts, crash_loop=crash_loop)

    def record_claim_lost(self, query: str, kind: str) -> None:
        """A claim of the pipeline on YTsaurus (its checkpoint location or consumer) was lost while opsd ran."""
        self.metrics.claims_lost.labels(query=query, kind=kind).inc()

    def record_permanent_failure(self, query: str, exception_class: str, message: str) -> None:
        """The runner stopped the query for good: its failure cannot pass by restarting."""
        self.status.update(query, permanent_failure=message, exception_class=exception_class, error=message)
        self.metrics.query_failed_permanently.labels(query=query).set(1)

    def record_crash_loop(self, query: str, crash_loop: bool) -> None:
        """Set or clear the crash-loop flag (the runner clears it once the backoff resets)."""
        previous = self.status.get(query)
        self.status.update(query, crash_loop=crash_loop)
        self.metrics.query_crash_loop.labels(query=query).set(int(crash_loop))
        if not crash_loop and previous and previous.crash_loop:
            log.info("query_crash_loop_ended", query=query)

    def record_stalled(self, query: str, stalled: bool) -> None:
        """The watchdog's verdict for one query."""
        previous = self.status.get(query)
        self.status.update(query, stalled=stalled)
        self.metrics.query_stalled.labels(query=query).set(int(stalled))
        if stalled and not (previous and previous.stalled):
            log.warning("query_stalled", query=query)
        elif not stalled and previous and previous.stalled:
            log.info("query_progressing_again", query=query)

    def record_tuning(
        self, query: str, *, max_rows_per_partition: int | None = None, dyn_batch_size: int | None = None,
        max_bytes_per_partition: int | None = None,
    ) -> None:
        """Current live-tuning values of a query (None leaves a value unchanged); a change is logged."""
        previous = self.status.get(query) or QueryStatus(query)
        if max_rows_per_partition is not None:
            self.status.update(query, max_rows_per_partition=max_rows_per_partition)
            self.metrics.tuning_max_rows_per_partition.labels(query=query).set(max_rows_per_partition)
        if max_bytes_per_partition is not None:
            self.status.update(query, max_bytes_per_partition=max_bytes_per_partition)
            self.metrics.tuning_max_partition_bytes.labels(query=query).set(max_bytes_per_partition)
        if dyn_batch_size is not None:
            self.status.update(query, dyn_batch_size=dyn_batch_size)
            self.metrics.tuning_dyn_batch_size.labels(query=query).set(dyn_batch_size)
        current = self.status.get(query) or previous

        def values(s: QueryStatus) -> tuple[int | None, ...]:
            return s.max_rows_per_partition, s.max_bytes_per_partition, s.dyn_batch_size

        if values(current) != values(previous):
            log.info("tuning_in_force", query=query, max_rows_per_partition=current.max_rows_per_partition,
                     max_bytes_per_partition=current.max_bytes_per_partition, dyn_batch_size=current.dyn_batch_size)

    def record_desync(self, desync: QueueDesync) -> None:
        """One queue's desync (the desync check's result); logs `desync_state_changed` for every partition whose
        state changed. The queue's last heal is kept. A gauge whose value did not change is not set again (the
        check runs over every partition of every query)."""
        query, queue = desync.facts.query, desync.facts.queue
        current = self.status.get(query)
        before = dict((current.desync or {}) if current else {})
        entry = before.get(queue) or DesyncEntry()
        old = {p.facts.partition: p for p in entry.desync.partitions} if entry.desync else {}
        for p in desync.partitions:
            partition, state, seen = p.facts.partition, p.state, old.get(p.facts.partition)
            previous = seen.state if seen else None
            if seen is not None and previous == state and seen.difference_rows == p.difference_rows:
                continue
            labels = {"query": query, "queue": queue, "partition": str(partition)}
            self.metrics.desync_rows.labels(**labels).set(p.difference_rows)
            if previous == state:
                continue
            if previous:
                self.metrics.desync_state.labels(**labels, state=previous.value).set(0)
            self.metrics.desync_state.labels(**labels, state=state.value).set(1)
            log.info("desync_state_changed", query=query, queue=queue, partition=partition, state=state.value,
                     previous=previous and previous.value, difference_rows=p.difference_rows)
        before[queue] = replace(entry, desync=desync)
        self.status.update(query, desync=before)

    def record_heal(self, query: str, queue: str, outcome: HealOutcome, moves: Mapping[int, tuple[int, int]]) -> None:
        """A heal of a queue's consumer and its outcome (`moves`: `{partition: (old, new)}`)."""
        self.metrics.desync_heals.labels(query=query, queue=queue, outcome=outcome.value).inc()
        current = self.status.get(query)
        desync = dict((current.desync or {}) if current else {})
        desync[queue] = replace(desync.get(queue) or DesyncEntry(), last_heal=Heal(outcome, self.clock(), moves))
        self.status.update(query, desync=desync)

    def record_lag(self, lag: QueryLag) -> None:
        """A query's backlog, lag and time to drain (the lag check's result; None where unknown). A partition's gauges
        are set when their values changed."""
        m, query = self.metrics, lag.query
        current = self.status.get(query)
        old = {(p.queue, p.partition): p for p in current.lag.partitions} if current and current.lag else {}
        for p in lag.partitions:
            seen = old.get((p.queue, p.partition))
            if seen == p:
                continue
            labels = {"query": query, "queue": p.queue, "partition": str(p.partition)}
            if seen is None or seen.unread_rows != p.unread_rows:
                m.queue_unread_rows.labels(**labels).set(p.unread_rows)
            if p.lag_seconds is not None and (seen is None or seen.lag_seconds != p.lag_seconds):
                m.queue_lag_seconds.labels(**labels).set(p.lag_seconds)
        for family, value in ((m.queue_input_rows_per_second, lag.input_rows_per_second),
                              (m.queue_read_rows_per_second, lag.processed_rows_per_second),
                              (m.time_to_drain_seconds, lag.time_to_drain_seconds)):
            if value is not None:
                family.labels(query=query).set(value)
        self.status.update(query, lag=lag)

    def record_trim(self, trim: QueueTrim) -> None:
        """A queue's trim forecast (the trim check's result): the gauge of each partition whose forecast is known, and
        `trim_risk_changed` logged for each partition that came within, or left, the level a person must act at."""
        query, queue = trim.query, trim.queue
        current = self.status.get(query)
        before = dict((current.trim or {}) if current else {})
        old = {p.partition: p for p in before[queue].partitions} if queue in before else {}
        for p in trim.partitions:
            labels = {"query": query, "queue": queue, "partition": str(p.partition)}
            if p.eta_seconds is not None:
                self.metrics.queue_trim_eta_seconds.labels(**labels).set(p.eta_seconds)
            seen = old.get(p.partition)
            if p.at_risk != (seen.at_risk if seen else False):
                (log.warning if p.at_risk else log.info)(
                    "trim_risk_changed", query=query, queue=queue, partition=p.partition, at_risk=p.at_risk,
                    outlook=p.outlook.value, eta_seconds=p.eta_seconds, binding=p.binding, unread_rows=p.unread_rows)
        before[queue] = trim
        self.status.update(query, trim=before)

    def record_vital_consumers(self, query: str, audits: tuple[VitalConsumerAudit, ...]) -> None:
        """The vital consumers of the queues a query reads (the vital-consumer audit's result): their gauges (0 for one
        no longer vital), and `vital_consumer_stalled` / `vital_consumer_moving` logged when one starts or stops
        being a finding."""
        current = self.status.get(query)
        old = {(a.queue, a.consumer): a for a in ((current.vital_consumers or ()) if current else ())}
        for audit in audits:
            labels = {"query": query, "queue": audit.queue, "consumer": audit.consumer}
            self.metrics.vital_consumer_stalled_seconds.labels(**labels).set(audit.stalled_seconds)
            self.metrics.vital_consumer_waiting_rows.labels(**labels).set(audit.waiting_rows)
            seen = old.pop((audit.queue, audit.consumer), None)
            if audit.stalled != (seen.stalled if seen else False):
                (log.warning if audit.stalled else log.info)(
                    "vital_consumer_stalled" if audit.stalled else "vital_consumer_moving", query=query,
                    queue=audit.queue, consumer=audit.consumer, stalled_seconds=round(audit.stalled_seconds),
                    waiting_rows=audit.waiting_rows)
        for gone in old.values():
            labels = {"query": query, "queue": gone.queue, "consumer": gone.consumer}
            self.metrics.vital_consumer_stalled_seconds.labels(**labels).set(0)
            self.metrics.vital_consumer_waiting_rows.labels(**labels).set(0)
        self.status.update(query, vital_consumers=audits)

    def record_autotune(self, decision: TunerDecision) -> None:
        """One auto-tuner decision: counted, exported, kept on the status (stamped with the recorder's clock) and
        logged with its `inputs` (a hold at debug level: it repeats at every run); an applied change also becomes the
        value in force."""
        d, m = decision.decision, self.metrics
        query, knob, direction = d.query, d.knob, d.direction
        m.autotune_decisions.labels(query=query, knob=knob, direction=direction.value, reason=d.reason).inc()
        if d.recommended is not None:
            m.autotune_recommended.labels(query=query, knob=knob).set(d.recommended)
        for bound, value in zip(("min", "max"), decision.bounds, strict=True):
            m.autotune_bound.labels(query=query, knob=knob, bound=bound).set(value)
        status = self.status.get(query)
        decisions = dict((status.autotune or {}) if status else {})
        decisions[knob] = replace(decision, at=self.clock())
        self.status.update(query, autotune=decisions)
        (log.debug if direction == Direction.HOLD else log.info)(
            "autotune_decision", query=query, knob=knob, current=d.current, recommended=d.recommended,
            direction=direction.value, reason=d.reason, mode=decision.mode, applied=decision.applied,
            **jsonable(d.inputs))
        if decision.applied:
            self.record_tuning(query, **{knob: d.recommended})

    def record_replan(self, query: str, batch_id: int, refused: ReplanRefusal | None) -> None:
        """The tuner planned a failed run's batch again (down: under the cut cap), or refused to (hold)."""
        direction, reason = ((Direction.HOLD, TuneReason.REPLAN_REFUSED) if refused
                             else (Direction.DOWN, TuneReason.MEMORY_FAILURE))
        self.metrics.autotune_decisions.labels(query=query, knob="planned_batch", direction=direction,
                                               reason=reason).inc()

    def record_queue_signals(self, signals: QueueSignals) -> None:
        """A queue's Queue Agent signals (or opsd's own in their place); a disposition is one-hot, its previous value
        set to 0 when it changes. Unknown values are left as they were."""
        m, query, queue = self.metrics, signals.query, signals.queue
        m.queue_agent_served.labels(query=query, queue=queue).set(int(signals.served))
        current = self.status.get(query)
        kept = dict((current.queue_agent or {}) if current else {})
        before = {p.partition: p.disposition for p in kept[queue].partitions} if queue in kept else {}
        for p in signals.partitions:
            labels = {"query": query, "queue": queue, "partition": str(p.partition)}
            for family, value in ((m.queue_write_rows_per_second, p.write_rows_per_second),
                                  (m.consumer_unread_rows, p.unread_rows),
                                  (m.consumer_processing_lag_seconds, p.processing_lag_seconds)):
                if value is not None:
                    family.labels(**labels).set(value)
            if p.disposition is None:
                continue
            previous = before.get(p.partition)
            if previous is not None and previous != p.disposition:
                m.consumer_disposition.labels(**labels, disposition=previous.value).set(0)
            m.consumer_disposition.labels(**labels, disposition=p.disposition.value).set(1)
        kept[queue] = signals
        self.status.update(query, queue_agent=kept)

    def record_history_append(self, query: str, *, appended: int, failed: int) -> None:
        """Decisions appended to the query's history table, and decisions whose append failed."""
        self.metrics.history_entries.labels(query=query).inc(appended)
        self.metrics.history_append_failures.labels(query=query).inc(failed)

    def record_oom_pool(self, query: str, pool: str, *, risk: float, predicted_peak_bytes: float,
                        peak_bound_bytes: float, exceed_probability: float, limit_bytes: float,
                        observed_peak_bytes: float | None) -> None:
        """The OOM check's verdict for one memory pool of a query's next batch."""
        labels = {"query": query, "pool": pool}
        m = self.metrics
        m.oom_risk.labels(**labels).set(risk)
        m.oom_predicted_peak_bytes.labels(**labels).set(predicted_peak_bytes)
        m.oom_peak_bound_bytes.labels(**labels).set(peak_bound_bytes)
        m.oom_exceed_probability.labels(**labels).set(exceed_probability)
        m.oom_limit_bytes.labels(**labels).set(limit_bytes)
        if observed_peak_bytes is not None:
            m.oom_observed_peak_bytes.labels(**labels).set(observed_peak_bytes)

    def record_oom(self, query: str, verdict: OomVerdict, *, target_risk: float) -> None:
        """The OOM check's verdict for a query's next batch (its highest risk over the pools, the safe caps, the
        verdict per pool with its confidence), kept once: `QueryStatus.oom`."""
        previous = self.status.get(query)
        self.status.update(query, oom=verdict)
        self.metrics.oom_batch_bytes.labels(query=query).set(verdict.batch_bytes)
        if verdict.safe_max_rows_per_partition is not None:
            self.metrics.oom_safe_max_rows_per_partition.labels(query=query).set(verdict.safe_max_rows_per_partition)
        if verdict.safe_max_bytes_per_partition is not None:
            self.metrics.oom_safe_max_partition_bytes.labels(query=query).set(verdict.safe_max_bytes_per_partition)
        if verdict.risk > target_risk and not (previous and previous.oom and previous.oom.risk > target_risk):
            log.warning("oom_risk_high", query=query, risk=round(verdict.risk, 3), batch_bytes=int(verdict.batch_bytes),
                        safe_max_rows_per_partition=verdict.safe_max_rows_per_partition)

    def forget_absent(self, queries: Sequence[QueryPositions]) -> None:
        """Series follow the world: after a cycle's reading (`queries`, every query it found), the series of every
        family the cycle's steps write per queue go for a query the reading no longer has (removed from the config,
        or no longer running), a queue it no longer reads, and a partition its queue no longer has (removed by a
        reshard, or not among the partitions read). A queue whose reading failed keeps its series (a failed read is
        not a change of the world), except for the partitions a reshard removed. The `opsd_source_*` series are the
        listener's (a query's progress events, which the reading may not see): they are not judged here."""
        read = {q.query: {queue.queue: queue for queue in q.queues} for q in queries}

        def present(labels: Mapping[str, str]) -> bool:
            queue = read.get(labels["query"], {}).get(labels["queue"])
            if queue is None:
                return False
            partition = labels.get("partition")
            if partition is None:
                return True
            if int(partition) in queue.removed_partitions:
                return False
            return queue.problem is not None or any(str(p.partition) == partition for p in queue.partitions)

        gone = sum(f.retain(present) for f in self.metrics.families
                   if "queue" in f.labelnames and not f.name.startswith(PROGRESS_FAMILIES))
        if gone:
            log.info("series_removed", series=gone)

    def record_cycle_steps(self, steps: Sequence[str]) -> None:
        """The steps of a cycle, before its first run: their counters exist at 0 from the start, so `increase()` sees
        their first error or overrun."""
        for step in steps:
            for counter in (self.metrics.check_runs, self.metrics.check_errors, self.metrics.cycle_step_overruns):
                counter.labels(check=step)

    def record_cycle(self, trace: CycleTrace, seconds: float, step_seconds: Mapping[str, float]) -> None:
        """One cycle of the position checks: its duration (`seconds`, by the monotonic timer), each step run as a run
        of its check (`step_seconds`: its own time), a failed step as its error, a slow or skipped one as an overrun;
        the trace for `/status`."""
        m = self.metrics
        m.cycle_duration_seconds.labels().observe(seconds)
        for step in trace.steps:
            if step.step in step_seconds:
                m.check_runs.labels(check=step.step).inc()
                m.check_duration_seconds.labels(check=step.step).observe(step_seconds[step.step])
            if step.outcome is StepOutcome.FAILED:
                m.check_errors.labels(check=step.step).inc()
            if step.outcome in (StepOutcome.SLOW, StepOutcome.STILL_RUNNING):
                m.cycle_step_overruns.labels(check=step.step).inc()
                log.warning("cycle_step_overran", step=step.step, outcome=step.outcome.value)
        self.status.set_cycle(trace)

    def record_memory_failure(self, query: str, pool: str) -> None:
        """A failure of the query whose cause is the pool's memory."""
        self.metrics.memory_failures.labels(query=query, pool=pool).inc()
        log.warning("memory_failure", query=query, pool=pool)

    def record_producers(self, report: ProducerReport, new: ProducerCounts, fences: tuple[Fence, ...]) -> None:
        """A query's producer (the producers check's report): its gauges, what the run counted (`new`), each fence
        first seen logged as `producer_zombie_fenced_seen`, and `producer_state_changed` when its state changes."""
        m, query = self.metrics, report.query
        previous = self.status.get(query)
        before = previous.producers if previous else None
        m.producer_sessions.labels(query=query).set(len(report.sessions))
        m.producer_sessions_ahead.labels(query=query).set(len(report.sessions_ahead))
        m.producer_epoch_bumps.labels(query=query).inc(new.epoch_bumps)
        m.producer_skipped_rows.labels(query=query).inc(new.skipped_rows)
        m.producer_fenced_zombies.labels(query=query).inc(new.fenced_zombies)
        for fence in fences:
            log.warning("producer_zombie_fenced_seen", query=query, session=fence.session, epoch=fence.epoch,
                        batch_id=fence.batch_id, partition=fence.partition, attempt=fence.attempt)
        if before is None or before.state != report.state:
            (log.warning if report.state.needs_action else log.info)(
                "producer_state_changed", query=query, producer=report.producer, state=report.state.value,
                previous=before.state.value if before else None, sessions_ahead=len(report.sessions_ahead),
                problem=report.problem)
        self.status.update(query, producers=report)

    def record_phases(self, query: str, shares: PhaseShares, new: tuple[BatchPhases, ...]) -> None:
        """Where the query's recent batches spent their time; each newly measured batch counted once."""
        self.status.update(query, phases=shares)
        for batch in new:
            for phase, seconds in batch.seconds.items():
                self.metrics.batch_time_seconds.labels(query=query, phase=phase).inc(seconds)
        if new:
            log.info("batch_phases", query=query, batches=len(new), largest=shares.largest,
                     share=round(shares.shares[shares.largest], 3), coverage=round(shares.coverage, 3))

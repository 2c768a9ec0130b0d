"""Advice: a query's status (the checks' typed results: `opsd.observe.status.QueryStatus`) into findings, each with
the command to run or the value to set. Pure: no cluster, no clock.

Every advice is meant to be followed as written: `tests/test_doctor_advice.py` follows each one (those that only a
running daemon sees, from their results). Commands name
the query the way the doctor was given it (`Naming`): `QUERY --config FILE` for a config, `--checkpoint LOCATION`
offline, `CONFIG` (the daemon's config, which the doctor does not know) for a running daemon.

Desync states follow `opsd.checks.desync.evaluate`; `lagging_one_batch` is the documented late acknowledgement and
needs no action (a heal tidies it), the others do. Offsets past the queue's end and a checkpoint behind the trim are
never healed: the advice moves the consumer by hand (`opsd consumer seek`), and a query resumes at the consumer when
the consumer is further than its checkpoint (the source's rule), so a seek to the trim lets a query behind it resume
with its own checkpoint, the trimmed rows lost. A backlog that does not drain (while the query runs), a failed,
crash-looping, stalled or stopped-for-good query, and a next batch predicted near or past a memory limit need action
too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from shlex import quote

from opsd.config.thresholds import OOM_RISK_HIGH
from opsd.doctor.report import Advice, Finding, FindingKind, Severity
from opsd.doctor.retention import retention_advice
from opsd.observe.status import QueryStatus
from opsd.results.desync import AHEAD_OF_QUEUE, DesyncState, PartitionDesync, QueueDesync
from opsd.results.positions import QueuePositions
from opsd.results.producers import ProducerState

#: Failures whose way out is the desync finding of the same query (its consumer must be moved first).
DESYNC_FAILURES = ("TrimmedRowsError", "BeyondQueueEndError")
#: Desync findings after which the query cannot resume with its checkpoint as it is (`opsd run --check` refuses).
RESUME_BLOCKERS = (FindingKind.DESYNC_UNKNOWN, DesyncState.CONSUMER_AHEAD, DesyncState.BEHIND_TRIM,
                   *sorted(AHEAD_OF_QUEUE))


@dataclass(frozen=True)
class Naming:
    """How a command names a query where the doctor's facts came from: `desync(query)` the arguments of
    `opsd desync show | heal`, `seek(query)` those that give `opsd consumer seek` the query's checkpoint, `config`
    the config file for `opsd run` (a placeholder when unknown), `cluster` the ` --cluster URI` of commands that
    name nothing else (empty: the default cluster)."""

    desync: Callable[[str], str]
    seek: Callable[[str], str]
    config: str
    cluster: str = ""
    names_consumer: bool = True
    names_queue: bool = True

    @classmethod
    def of_config(cls, path: str, cluster: str | None = None) -> Naming:
        path = quote(path)
        return cls(lambda q: f"{quote(q)} --config {path}", lambda q: f"--query {quote(q)} --config {path}", path,
                   f" --cluster {quote(cluster)}" if cluster else "")

    @classmethod
    def of_checkpoint(cls, flags: str, cluster: str | None = None) -> Naming:
        """`flags`: ` --queue Q --consumer C --cluster URI` as given (each only when given); a heal's advice adds the
        queue and the consumer where they do not name them (a heal moves only the consumer of the queue the command
        names)."""
        at = f" --cluster {quote(cluster)}" if cluster else ""
        return cls(lambda q: f"--checkpoint {quote(q)}{flags}", lambda q: f"--checkpoint {quote(q)}{at}", "CONFIG", at,
                   names_consumer="--consumer " in flags, names_queue="--queue " in flags)


def findings(query: str, status: QueryStatus, naming: Naming, *, offline: bool = False) -> list[Finding]:
    """The findings of a query's status; `offline`: read by the doctor itself, so whether the query runs is not
    known (a daemon knows it)."""
    found: list[Finding] = []
    active = None if offline else status.active

    def add(kind: FindingKind, severity: Severity, what: str, advice: str) -> None:
        found.append(Finding(query, severity, what, advice, kind))

    check = (f"check the fix (opsd run --check {naming.config}; exit 0 when every pipeline can start and resume "
             "its checkpoint)")
    if status.permanent_failure:
        named = status.permanent_failure
        add(FindingKind.PERMANENT_FAILURE, Severity.ACTION, f"opsd stopped the query for good: {named}",
            f"a restart would fail the same way: fix what it names{_first_move(named, status)}, {check}, then "
            f"restart opsd (opsd run {naming.config})")
    elif status.exception_class and not active:
        error = status.error or f"{status.exception_class}: {_first_line(status.exception)}"
        add(FindingKind.FAILED, Severity.ACTION, f"the query failed: {error}",
            f"read the failure in opsd's log (event query_failed) and fix its cause{_first_move(error, status)}; "
            f"{check}; opsd restarts the query with backoff")
    if status.crash_loop:
        add(FindingKind.CRASH_LOOP, Severity.ACTION,
            f"the query is crash looping ({status.restarts} restarts)",
            "its restart backoff is at the cap: fix the failure above; restarts alone will not")
    if status.stalled:
        add(FindingKind.STALLED, Severity.ACTION, "the query makes no progress although rows are waiting",
            "look for a hung sink or lost executors (Spark UI, executor logs); if it stays stuck, restart opsd "
            f"(SIGTERM, then opsd run {naming.config}): the query resumes from its checkpoint")
    found.extend(desync_findings(query, status, naming, active))
    for kind, sev, what, advice in (*_lag(query, status, naming, active), *_memory(query, status, naming),
                                    *retention_advice(status, naming.cluster), *_phases(status),
                                    *_producers(status, naming)):
        found.append(Finding(query, sev, what, advice, kind))
    return found


def desync_findings(query: str, status: QueryStatus, naming: Naming, active: bool | None) -> list[Finding]:
    """The findings of each queue's desync (`kind`: the state, or `FindingKind.DESYNC_UNKNOWN`); `active` None: not
    known whether the query runs."""
    return [Finding(query, sev, what, advice, kind) for queue, entry in (status.desync or {}).items()
            if entry.desync is not None
            for kind, sev, what, advice in _desync(queue, entry.desync, query, naming, active)]


def _desync(queue: str, desync: QueueDesync, query: str, naming: Naming, active: bool | None) -> list[Advice]:
    facts = desync.facts
    if facts.removed_partitions:
        return [_resharded(queue, facts)]
    if facts.problem:
        return [(FindingKind.DESYNC_UNKNOWN, Severity.ACTION, f"{queue}: desync unknown: {facts.problem}",
                 "fix the checkpoint location, queue or consumer named above (in the config: the pipeline's source "
                 "or its watch: entry; offline: --queue / --consumer), then run the doctor again")]
    consumer = facts.consumer
    seek = f"opsd consumer seek {quote(queue)} {quote(consumer)}"

    def seeking(flags: str) -> str:
        return f"{seek} {flags} {naming.seek(query)}"

    out = []
    by_state: dict[DesyncState, list[tuple[int, PartitionDesync]]] = {}
    for p in sorted(desync.partitions, key=lambda p: p.facts.partition):
        by_state.setdefault(p.state, []).append((p.facts.partition, p))
    waiting = any(p.facts.row_count > p.facts.checkpoint_next for p in desync.partitions)
    heal = (f"(opsd desync heal {naming.desync(query)}"
            + ("" if naming.names_queue else f" --queue {quote(queue)}")
            + ("" if naming.names_consumer else f" --consumer {quote(consumer)}")
            + (" --stopped" if active is False and waiting else "") + ")")
    if waiting and active is None:
        heal += "; add --stopped once the query is stopped (while it runs, its next batch acknowledges this one)"
    if DesyncState.LAGGING_ONE_BATCH in by_state:
        parts = _names(by_state[DesyncState.LAGGING_ONE_BATCH])
        out.append((DesyncState.LAGGING_ONE_BATCH, Severity.INFO,
                    f"{queue}: consumer {consumer} is one batch behind the "
                    f"checkpoint on {parts} (the late acknowledgement of an idle query or an availableNow run; it "
                    "holds the queue's trim)", f"heal it {heal}"))
    if DesyncState.STUCK in by_state:
        rows = sum(p.difference_rows for _, p in by_state[DesyncState.STUCK])
        out.append((DesyncState.STUCK, Severity.ACTION,
                    f"{queue}: consumer {consumer} has not followed several committed "
                    f"batches on {_names(by_state[DesyncState.STUCK])} ({rows} rows behind)",
                    "its acknowledgements fail (look for consumer_advance_conflict in the query's log: is another "
                    f"job moving the same consumer?); then heal it {heal}"))
    for partition, p in by_state.get(DesyncState.CONSUMER_AHEAD, []):
        back = max(p.facts.checkpoint_next, p.facts.trimmed_row_count)
        out.append((DesyncState.CONSUMER_AHEAD, Severity.ACTION,
                    f"{queue}: consumer {consumer} is ahead of the checkpoint on "
                    f"partition {partition}: rows [{back}, {p.facts.consumer_offset}) would be skipped at restart",
                    "if another job read those rows, give each job its own consumer; if not, stop the query and move "
                    f"the consumer back to the checkpoint ({seeking(f'--partition {partition} --offset {back}')}; a "
                    "heal never moves a consumer backwards), then restart it"))
    ahead = by_state.get(DesyncState.CHECKPOINT_AHEAD_OF_QUEUE, [])
    if ahead:
        rows = ", ".join(f"[{p.facts.row_count}, {p.facts.checkpoint_next}) of partition {n}" for n, p in ahead)
        out.append((DesyncState.CHECKPOINT_AHEAD_OF_QUEUE, Severity.ACTION,
                    f"{queue}: the checkpoint has read past the "
                    f"queue's end on {_names(ahead)} (the queue was recreated under this path, or the checkpoint is "
                    f"another queue's): rows {rows} would be skipped once written; the source refuses to read on "
                    "(BeyondQueueEndError)",
                    "never healed: this checkpoint cannot resume. Stop the query, move the consumer to the queue's "
                    f"first row ({seeking('--to trim --past-checkpoint')}) and restart the query with a new "
                    "checkpointLocation (it starts where the consumer stands)"))
    for partition, p in by_state.get(DesyncState.CONSUMER_AHEAD_OF_QUEUE, []):
        back = f"--partition {partition} --offset {p.facts.checkpoint_next}"
        out.append((DesyncState.CONSUMER_AHEAD_OF_QUEUE, Severity.ACTION,
                    f"{queue}: consumer {consumer} is past the queue's end on partition {partition}: offset "
                    f"{p.facts.consumer_offset}, but the queue has {p.facts.row_count} rows (moved by hand, or left "
                    "from a queue recreated under this path): the rows written below it "
                    "would never be read",
                    "stop the query and move the consumer back to the checkpoint "
                    f"({seeking(back)}), then restart it"))
    behind = by_state.get(DesyncState.BEHIND_TRIM, [])
    if behind:
        lost = sum(p.facts.trimmed_row_count - max(p.facts.checkpoint_next, p.facts.consumer_offset) for _, p in behind)
        rows = ", ".join(f"[{max(p.facts.checkpoint_next, p.facts.consumer_offset)}, {p.facts.trimmed_row_count}) of "
                         f"partition {n}" for n, p in behind)
        vital = facts.vital
        how = (f"although consumer {consumer} is registered as vital (a trim with --past-vital-consumers)" if vital
               else f"consumer {consumer} is not registered as vital, so trims do not wait for it")
        guard = "" if vital else (f"; so that trims wait for it from now on, register it as vital (opsd consumer "
                                  f"register {quote(queue)} {quote(consumer)} --vital{naming.cluster})")
        partitions = " ".join(f"--partition {n}" for n, _ in behind)
        out.append((DesyncState.BEHIND_TRIM, Severity.ACTION,
                    f"{queue}: rows {rows} were trimmed before the query read them "
                    f"({lost} rows; {how}): its next batch fails (TrimmedRowsError), with this checkpoint or a new "
                    "one, until the consumer is moved",
                    f"those {lost} rows are gone; to go on without them, stop the query, move the consumer to the "
                    f"first row still there ({seeking(partitions + ' --to trim')}) and restart the query: it resumes "
                    f"at the consumer, with its checkpoint{guard}"))
    return out


def _resharded(queue: str, facts: QueuePositions) -> Advice:
    """Tablets the checkpoint has read were removed from the queue: the source refuses to go on
    (`QueueReshardedError`); only a new checkpoint, starting at the consumer, gets past it."""
    removed = ", ".join(str(p) for p in facts.removed_partitions)
    return (FindingKind.RESHARDED, Severity.ACTION,
            f"{queue}: the checkpoint has read partitions {removed}, which the queue no longer has (a reshard to "
            "fewer tablets): the query stops with QueueReshardedError",
            "restart the query with a new checkpointLocation: it starts where the consumer "
            f"{facts.consumer} stands. To scale a queue under a running query, only add tablets "
            f"(opsd queue reshard {quote(queue)} --tablets N, N above the current count): they are read without a "
            "restart")


def _lag(query: str, status: QueryStatus, naming: Naming, active: bool | None) -> list[Advice]:
    """A backlog that does not drain, for a running query only: a stopped one drains nothing whatever its tuning."""
    lag = status.lag
    if active is False or lag is None or lag.time_to_drain_seconds != math.inf or not lag.backlog_rows:
        return []
    cap = status.max_rows_per_partition
    arrive, read = _rate(lag.input_rows_per_second), _rate(lag.processed_rows_per_second)
    more = "give the query more executors or cores"
    advice = (f"if its batches are short, raise max_rows_per_partition (now {cap}) in its tuning document (opsd "
              f"tuning set {quote(query)} --config {naming.config} --max-rows-per-partition {2 * cap}), else "
              f"{more}" if cap
              else f"it reads every waiting row at each batch (max_rows_per_partition unlimited): {more}")
    return [(FindingKind.LAG, Severity.ACTION,
             f"the backlog of {lag.backlog_rows} rows is not draining: rows arrive at {arrive}, the query reads "
             f"{read}", advice)]


def _memory(query: str, status: QueryStatus, naming: Naming) -> list[Advice]:
    """The OOM check's verdict on the next batch (`opsd.checks.oom`): risk = predicted peak / the pool's limit."""
    oom = status.oom
    if oom is None or oom.risk < OOM_RISK_HIGH:
        return []
    risk = oom.risk
    safe, cap = oom.safe_max_rows_per_partition, status.max_rows_per_partition
    safe_bytes, cap_bytes = oom.safe_max_bytes_per_partition, status.max_bytes_per_partition
    tuning_set = f"opsd tuning set {quote(query)} --config {naming.config}"
    if safe_bytes:
        advice = (f"cap its batches at the safe max_bytes_per_partition {safe_bytes} (now {cap_bytes or 'unlimited'}; "
                  "it holds whatever the rows' width, a row cap only at the width of the rows read last) in its tuning "
                  f"document ({tuning_set} --max-bytes-per-partition {safe_bytes}), or let the auto-tuner apply it "
                  "(autotune.mode: apply)")
    elif safe:
        advice = (f"cap its batches at the safe max_rows_per_partition {safe} (now {cap or 'unlimited'}) in its tuning "
                  f"document ({tuning_set} --max-rows-per-partition {safe}), or let the auto-tuner apply it "
                  "(autotune.mode: apply)")
    else:
        advice = "give the query more memory (spark.driver.memory / executor memory): even a small batch is at risk"
    return [(FindingKind.MEMORY, Severity.ACTION,
             f"the next batch is predicted to need {risk:.0%} of a memory pool's limit (opsd_oom_risk; 100% = out of "
             "memory)", advice)]


#: Per phase (`streaming_core.phases.PHASES`), where to look when it takes most of the batches' time.
PHASE_ADVICE = {
    "planning": "each batch's fixed cost binds: fewer, larger batches (a higher max_rows_per_partition, or a trigger "
                "interval) spread it over more rows",
    "worker_start": "Spark starts Python workers for the batches: keep spark.python.worker.reuse on (its default)",
    "read_wait": "the cluster's reads bind: more tablets read in parallel (opsd queue reshard QUEUE --tablets N adds "
                 "some, read without a restart), or a proxy nearer to the executors",
    "decode": "decoding rows binds: read the columns the query uses only, or give it more cores",
    "transform": "the query's own transformation binds: profile it (the Spark UI's SQL tab shows its operators)",
    "sink_insert": "the sink's inserts bind: larger insert calls (spark.yt.write.dynBatchSize) or more tablets in the "
                   "output table",
    "commit": "the sink's commit binds: a transactional commit publishes every staged row at once; fewer, larger "
              "batches commit less often",
    "acknowledge": "acknowledging binds: the consumer advance is one call per batch; fewer, larger batches make fewer",
    "spark_other": "Spark's own per-batch work binds (its offset and commit logs, job scheduling): fewer, larger "
                   "batches",
}


def _phases(status: QueryStatus) -> list[Advice]:
    """Where the query's recent batches spent their time (the phases check), said in words, and where to look."""
    phases = status.phases
    if phases is None or phases.largest not in PHASE_ADVICE or not phases.words:
        return []
    return [(FindingKind.PHASES, Severity.INFO, f"{phases.words} (the last {phases.batches} measured batches, "
             f"{phases.coverage:.0%} of their time measured)", PHASE_ADVICE[phases.largest])]


def _producers(status: QueryStatus, naming: Naming) -> list[Advice]:
    """The producer of a query in the sink's producer mode (the producers check, `opsd.checks.producers`)."""
    producer = status.producers
    if producer is None:
        return []
    path, queue = producer.producer, producer.queue
    inspect = f"opsd producer inspect {quote(path)} --queue {quote(queue)}{naming.cluster}"
    if producer.state is ProducerState.PROBLEM:
        return [(FindingKind.PRODUCER_PROBLEM, Severity.ACTION, f"its queue producer {path} could not be read: "
                 f"{producer.problem}", f"create it (opsd producer create {quote(path)}{naming.cluster}) or give the "
                 f"query the right producer_path; {inspect} shows it once it is there")]
    if producer.state is ProducerState.SESSIONS_AHEAD:
        ahead = producer.sessions_ahead
        prefix = ahead[0].rpartition("-")[0] if ahead else ""
        return [(FindingKind.PRODUCER_SESSIONS_AHEAD, Severity.ACTION,
                 f"{len(ahead)} session(s) of its queue producer {path} hold later batches than the query (batch "
                 f"{producer.query_batch_id}): the rows it writes now are skipped as written before",
                 "stop the query, remove its old sessions (opsd producer remove-sessions "
                 f"{quote(path)} {quote(queue)} --session {quote(prefix)}{naming.cluster}), then start it again "
                 f"(opsd run {naming.config}); the rows skipped so far "
                 "are not in the queue")]
    fence = producer.last_fence
    if producer.state is ProducerState.ZOMBIE_FENCED and fence is not None:
        return [(FindingKind.PRODUCER_ZOMBIE_FENCED, Severity.INFO,
                 f"attempt {fence.attempt} of partition {fence.partition} of batch {fence.batch_id} was fenced off: "
                 "it pushed after Spark ran its task again, and the producer refused it (no row duplicated)",
                 "tasks run twice: look for lost executors (the Spark UI's Executors tab) or turn spark.speculation "
                 f"off; {inspect} shows the sessions")]
    return []


def _first_move(error: str, status: QueryStatus) -> str:
    """For a failure that only moving the consumer ends: say so, and where the way is."""
    if not any(c in error for c in DESYNC_FAILURES):
        return ""
    return " (its consumer must be moved first" + (": the desync finding below says how)" if status.desync
                                                    else ": run the doctor with --config for how)")


def _names(parts: list[tuple[int, PartitionDesync]]) -> str:
    return "partition" + ("s " if len(parts) > 1 else " ") + ", ".join(str(p) for p, _ in parts)


def _rate(value: float | None) -> str:
    return "? rows/s" if value is None else f"{value:.0f} rows/s"


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""

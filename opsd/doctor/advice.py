"""Advice: a query's facts (the `/status` shape) into findings, each with the command to run or the value to set.
Pure: no cluster, no clock.

Every advice is meant to be followed as written: `tests/test_doctor_advice.py` follows each one (those that only a
running daemon sees, from their facts). Commands name
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opsd.config.thresholds import OOM_RISK_HIGH
from opsd.doctor.report import Finding, Severity
from opsd.doctor.retention import retention_advice
from opsd.observe.results import AHEAD_OF_QUEUE, DesyncState
from opsd.observe.status import json_number

#: Failures whose way out is the desync finding of the same query (its consumer must be moved first).
DESYNC_FAILURES = ("TrimmedRowsError", "BeyondQueueEndError")
#: Desync findings after which the query cannot resume with its checkpoint as it is (`opsd run --check` refuses).
RESUME_BLOCKERS = ("problem", DesyncState.CONSUMER_AHEAD, DesyncState.BEHIND_TRIM, *sorted(AHEAD_OF_QUEUE))


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

    @classmethod
    def of_config(cls, path: str, cluster: str | None = None) -> Naming:
        return cls(lambda q: f"{q} --config {path}", lambda q: f"--query {q} --config {path}", path,
                   f" --cluster {cluster}" if cluster else "")

    @classmethod
    def of_checkpoint(cls, flags: str, cluster: str | None = None) -> Naming:
        """`flags`: ` --queue Q --consumer C --cluster URI` as given (each only when given); a heal's advice adds the
        consumer where they do not name it (a heal moves only the consumer the command names)."""
        at = f" --cluster {cluster}" if cluster else ""
        return cls(lambda q: f"--checkpoint {q}{flags}", lambda q: f"--checkpoint {q}{at}", "CONFIG", at,
                   names_consumer="--consumer " in flags)


def findings(query: str, facts: Mapping[str, Any], naming: Naming) -> list[Finding]:
    found: list[Finding] = []

    def add(kind: str, severity: Severity, what: str, advice: str) -> None:
        found.append(Finding(query, severity, what, advice, kind))

    check = (f"check the fix (opsd run --check {naming.config}; exit 0 when every pipeline can start and resume "
             "its checkpoint)")
    if facts.get("permanent_failure"):
        named = facts["permanent_failure"]
        add("permanent_failure", Severity.ACTION, f"opsd stopped the query for good: {named}",
            f"a restart would fail the same way: fix what it names{_first_move(named, facts)}, {check}, then "
            f"restart opsd (opsd run {naming.config})")
    elif facts.get("exception_class") and not facts.get("active"):
        error = facts.get("error") or f"{facts['exception_class']}: {_first_line(facts.get('exception'))}"
        add("failed", Severity.ACTION, f"the query failed: {error}",
            f"read the failure in opsd's log (event query_failed) and fix its cause{_first_move(error, facts)}; "
            f"{check}; opsd restarts the query with backoff")
    if facts.get("crash_loop"):
        add("crash_loop", Severity.ACTION, f"the query is crash looping ({facts.get('restarts', 0)} restarts)",
            "its restart backoff is at the cap: fix the failure above; restarts alone will not")
    if facts.get("stalled"):
        add("stalled", Severity.ACTION, "the query makes no progress although rows are waiting",
            "look for a hung sink or lost executors (Spark UI, executor logs); if it stays stuck, restart opsd "
            f"(SIGTERM, then opsd run {naming.config}): the query resumes from its checkpoint")
    found.extend(desync_findings(query, facts, naming))
    for kind, sev, what, advice in (*_lag(query, facts, naming), *_memory(query, facts, naming),
                                    *retention_advice(facts, naming.cluster), *_phases(facts),
                                    *_producers(facts, naming)):
        found.append(Finding(query, sev, what, advice, kind))
    return found


def desync_findings(query: str, facts: Mapping[str, Any], naming: Naming) -> list[Finding]:
    """The findings of each queue's desync (`kind`: the state, or `problem`)."""
    return [Finding(query, sev, what, advice, kind) for queue, desync in (facts.get("desync") or {}).items()
            for kind, sev, what, advice in _desync(queue, desync, query, naming, facts.get("active"))]


def _desync(queue: str, desync: Mapping[str, Any], query: str, naming: Naming,
            active: bool | None) -> list[tuple[str, Severity, str, str]]:
    if desync.get("removed_partitions"):
        return [_resharded(queue, desync)]
    if desync.get("problem"):
        return [("problem", Severity.ACTION, f"{queue}: desync unknown: {desync['problem']}",
                 "fix the checkpoint location, queue or consumer named above (in the config: the pipeline's source "
                 "or its watch: entry; offline: --queue / --consumer), then run the doctor again")]
    consumer = desync.get("consumer")
    seek = f"opsd consumer seek {queue} {consumer}"

    def seeking(flags: str) -> str:
        return f"{seek} {flags} {naming.seek(query)}"

    out = []
    by_state: dict[DesyncState, list[tuple[str, Mapping[str, Any]]]] = {}
    for partition, p in sorted((desync.get("partitions") or {}).items(), key=lambda item: int(item[0])):
        state = DesyncState._value2member_map_.get(p["state"])  # a state this version does not know: no advice
        if isinstance(state, DesyncState):
            by_state.setdefault(state, []).append((partition, p))
    waiting = any(p["row_count"] > p["checkpoint_next"] for p in (desync.get("partitions") or {}).values())
    heal = (f"(opsd desync heal {naming.desync(query)}" + ("" if naming.names_consumer else f" --consumer {consumer}")
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
        rows = sum(p["difference_rows"] for _, p in by_state[DesyncState.STUCK])
        out.append((DesyncState.STUCK, Severity.ACTION,
                    f"{queue}: consumer {consumer} has not followed several committed "
                    f"batches on {_names(by_state[DesyncState.STUCK])} ({rows} rows behind)",
                    "its acknowledgements fail (look for consumer_advance_conflict in the query's log: is another "
                    f"job moving the same consumer?); then heal it {heal}"))
    for partition, p in by_state.get(DesyncState.CONSUMER_AHEAD, []):
        back = max(p["checkpoint_next"], p["trimmed_row_count"])
        out.append((DesyncState.CONSUMER_AHEAD, Severity.ACTION,
                    f"{queue}: consumer {consumer} is ahead of the checkpoint on "
                    f"partition {partition}: rows [{back}, {p['consumer_offset']}) would be skipped at restart",
                    "if another job read those rows, give each job its own consumer; if not, stop the query and move "
                    f"the consumer back to the checkpoint ({seeking(f'--partition {partition} --offset {back}')}; a "
                    "heal never moves a consumer backwards), then restart it"))
    ahead = by_state.get(DesyncState.CHECKPOINT_AHEAD_OF_QUEUE, [])
    if ahead:
        rows = ", ".join(f"[{p['row_count']}, {p['checkpoint_next']}) of partition {n}" for n, p in ahead)
        out.append((DesyncState.CHECKPOINT_AHEAD_OF_QUEUE, Severity.ACTION,
                    f"{queue}: the checkpoint has read past the "
                    f"queue's end on {_names(ahead)} (the queue was recreated under this path, or the checkpoint is "
                    f"another queue's): rows {rows} would be skipped once written; the source refuses to read on "
                    "(BeyondQueueEndError)",
                    "never healed: this checkpoint cannot resume. Stop the query, move the consumer to the queue's "
                    f"first row ({seeking('--to trim --past-checkpoint')}) and restart the query with a new "
                    "checkpointLocation (it starts where the consumer stands)"))
    for partition, p in by_state.get(DesyncState.CONSUMER_AHEAD_OF_QUEUE, []):
        back = f"--partition {partition} --offset {p['checkpoint_next']}"
        out.append((DesyncState.CONSUMER_AHEAD_OF_QUEUE, Severity.ACTION,
                    f"{queue}: consumer {consumer} is past the queue's "
                    f"end on partition {partition}: offset {p['consumer_offset']}, but the queue has {p['row_count']} "
                    "rows (moved by hand, or left from a queue recreated under this path): the rows written below it "
                    "would never be read",
                    "stop the query and move the consumer back to the checkpoint "
                    f"({seeking(back)}), then restart it"))
    behind = by_state.get(DesyncState.BEHIND_TRIM, [])
    if behind:
        lost = sum(p["trimmed_row_count"] - max(p["checkpoint_next"], p["consumer_offset"]) for _, p in behind)
        rows = ", ".join(f"[{max(p['checkpoint_next'], p['consumer_offset'])}, {p['trimmed_row_count']}) of "
                         f"partition {n}" for n, p in behind)
        vital = desync.get("vital")
        how = (f"although consumer {consumer} is registered as vital (a trim with --past-vital-consumers)" if vital
               else f"consumer {consumer} is not registered as vital, so trims do not wait for it")
        guard = "" if vital else (f"; so that trims wait for it from now on, register it as vital (opsd consumer "
                                  f"register {queue} {consumer} --vital{naming.cluster})")
        partitions = " ".join(f"--partition {n}" for n, _ in behind)
        out.append((DesyncState.BEHIND_TRIM, Severity.ACTION,
                    f"{queue}: rows {rows} were trimmed before the query read them "
                    f"({lost} rows; {how}): its next batch fails (TrimmedRowsError), with this checkpoint or a new "
                    "one, until the consumer is moved",
                    f"those {lost} rows are gone; to go on without them, stop the query, move the consumer to the "
                    f"first row still there ({seeking(partitions + ' --to trim')}) and restart the query: it resumes "
                    f"at the consumer, with its checkpoint{guard}"))
    return out


def _resharded(queue: str, desync: Mapping[str, Any]) -> tuple[str, Severity, str, str]:
    """Tablets the checkpoint has read were removed from the queue: the source refuses to go on
    (`QueueReshardedError`); only a new checkpoint, starting at the consumer, gets past it."""
    removed = ", ".join(str(p) for p in desync["removed_partitions"])
    return ("resharded", Severity.ACTION, f"{queue}: the checkpoint has read partitions {removed}, which the queue no "
            "longer has (a reshard to fewer tablets): the query stops with QueueReshardedError",
            "restart the query with a new checkpointLocation: it starts where the consumer "
            f"{desync.get('consumer')} stands. To scale a queue under a running query, only add tablets "
            f"(opsd queue reshard {queue} --tablets N, N above the current count): they are read without a restart")


def _lag(query: str, facts: Mapping[str, Any], naming: Naming) -> list[tuple[str, Severity, str, str]]:
    """A backlog that does not drain, for a running query only: a stopped one drains nothing whatever its tuning."""
    lag = facts.get("lag") or {}
    if facts.get("active") is False or json_number(lag.get("time_to_drain_seconds")) != math.inf \
            or not lag.get("backlog_rows"):
        return []
    cap = facts.get("max_rows_per_partition")
    arrive, read = _rate(lag.get("input_rows_per_second")), _rate(lag.get("processed_rows_per_second"))
    more = "give the query more executors or cores"
    advice = (f"if its batches are short, raise max_rows_per_partition (now {cap}) in its tuning document (opsd "
              f"tuning set {query} --config {naming.config} --max-rows-per-partition {2 * cap}), else {more}" if cap
              else f"it reads every waiting row at each batch (max_rows_per_partition unlimited): {more}")
    return [("lag", Severity.ACTION, f"the backlog of {lag['backlog_rows']} rows is not draining: rows arrive at "
             f"{arrive}, the query reads {read}", advice)]


def _memory(query: str, facts: Mapping[str, Any], naming: Naming) -> list[tuple[str, Severity, str, str]]:
    """The OOM check's verdict on the next batch (`opsd.checks.oom`): risk = predicted peak / the pool's limit."""
    oom = facts.get("oom") or {}
    risk = oom.get("risk")
    if risk is None or risk < OOM_RISK_HIGH:
        return []
    safe, cap = oom.get("safe_max_rows_per_partition"), facts.get("max_rows_per_partition")
    safe_bytes, cap_bytes = oom.get("safe_max_bytes_per_partition"), facts.get("max_bytes_per_partition")
    tuning_set = f"opsd tuning set {query} --config {naming.config}"
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
    return [("memory", Severity.ACTION, f"the next batch is predicted to need {risk:.0%} of a memory pool's limit "
             f"(opsd_oom_risk; 100% = out of memory)", advice)]


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


def _phases(facts: Mapping[str, Any]) -> list[tuple[str, Severity, str, str]]:
    """Where the query's recent batches spent their time (the phases check), said in words, and where to look."""
    phases = facts.get("phases") or {}
    largest, words = phases.get("largest"), phases.get("words")
    if largest not in PHASE_ADVICE or not words:
        return []
    return [("phases", Severity.INFO, f"{words} (the last {phases.get('batches')} measured batches, "
             f"{phases.get('coverage', 0):.0%} of their time measured)", PHASE_ADVICE[largest])]


def _producers(facts: Mapping[str, Any], naming: Naming) -> list[tuple[str, Severity, str, str]]:
    """The producer of a query in the sink's producer mode (the producers check, `opsd.checks.producers`)."""
    producer = facts.get("producers") or {}
    state, path, queue = producer.get("state"), producer.get("producer"), producer.get("queue")
    inspect = f"opsd producer inspect {path} --queue {queue}{naming.cluster}"
    if state == "problem":
        return [("producer_problem", Severity.ACTION, f"its queue producer {path} could not be read: "
                 f"{producer.get('problem')}", f"create it (opsd producer create {path}{naming.cluster}) or give the "
                 f"query the right producer_path; {inspect} shows it once it is there")]
    if state == "sessions_ahead":
        ahead = producer.get("sessions_ahead") or []
        prefix = str(ahead[0]).rpartition("-")[0]
        return [("producer_sessions_ahead", Severity.ACTION,
                 f"{len(ahead)} session(s) of its queue producer {path} hold later batches than the query (batch "
                 f"{producer.get('query_batch_id')}): the rows it writes now are skipped as written before",
                 f"stop the query, remove its old sessions (opsd producer remove-sessions {path} {queue} --session "
                 f"{prefix}{naming.cluster}), then start it again (opsd run {naming.config}); the rows skipped so far "
                 "are not in the queue")]
    if state == "zombie_fenced":
        fence = producer.get("last_fence") or {}
        return [("producer_zombie_fenced", Severity.INFO,
                 f"attempt {fence.get('attempt')} of partition {fence.get('partition')} of batch "
                 f"{fence.get('batch_id')} was fenced off: it pushed after Spark ran its task again, and the producer "
                 "refused it (no row duplicated)",
                 "tasks run twice: look for lost executors (the Spark UI's Executors tab) or turn spark.speculation "
                 f"off; {inspect} shows the sessions")]
    return []


def _first_move(error: str, facts: Mapping[str, Any]) -> str:
    """For a failure that only moving the consumer ends: say so, and where the way is."""
    if not any(c in error for c in DESYNC_FAILURES):
        return ""
    return " (its consumer must be moved first" + (": the desync finding below says how)" if facts.get("desync")
                                                    else ": run the doctor with --config for how)")


def _names(parts: list[tuple[str, Mapping[str, Any]]]) -> str:
    return "partition" + ("s " if len(parts) > 1 else " ") + ", ".join(p for p, _ in parts)


def _rate(value: float | None) -> str:
    return "? rows/s" if value is None else f"{value:.0f} rows/s"


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""

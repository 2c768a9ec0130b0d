"""Advice: a query's facts (the `/status` shape) into findings, each with the command to run or the value to set.
Pure: no cluster, no clock.

Desync states follow `opsd.checks.desync.evaluate`; `lagging_one_batch` is the documented late acknowledgement and
needs no action (a heal tidies it), the others do; offsets past the queue's end are never healed, the advice moves the
consumer by hand (`opsd consumer seek`). A backlog that does not drain, a failed, crash-looping, stalled
or stopped-for-good query, and a next batch predicted near or past a memory limit need action too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from opsd.config.thresholds import OOM_RISK_HIGH
from opsd.doctor.report import Finding, Severity
from opsd.doctor.retention import retention_advice
from opsd.observe.status import json_number

#: `opsd desync heal ...` for a query, as the user can run it where the doctor's facts came from.
HealCommand = Callable[[str], str]


def findings(query: str, facts: Mapping[str, Any], heal_command: HealCommand) -> list[Finding]:
    found: list[Finding] = []

    def add(severity: Severity, what: str, advice: str) -> None:
        found.append(Finding(query, severity, what, advice))

    if facts.get("permanent_failure"):
        add(Severity.ACTION, f"opsd stopped the query for good: {facts['permanent_failure']}",
            "a restart would fail the same way: fix what it names (`opsd run --check CONFIG` tests a config without "
            "starting any query), then restart opsd")
    elif facts.get("exception_class") and not facts.get("active"):
        error = facts.get("error") or f"{facts['exception_class']}: {_first_line(facts.get('exception'))}"
        add(Severity.ACTION, f"the query failed: {error}",
            "read the failure in opsd's log (event query_failed), fix its cause; opsd restarts the query")
    if facts.get("crash_loop"):
        add(Severity.ACTION, f"the query is crash looping ({facts.get('restarts', 0)} restarts)",
            "its restart backoff is at the cap: fix the failure above; restarts alone will not")
    if facts.get("stalled"):
        add(Severity.ACTION, "the query makes no progress although rows are waiting",
            "look for a hung sink or lost executors (Spark UI, executor logs); restart the query if it stays stuck")
    for queue, desync in (facts.get("desync") or {}).items():
        found.extend(Finding(query, sev, what, advice) for sev, what, advice in _desync(queue, desync,
                                                                                      heal_command(query)))
    found.extend(Finding(query, sev, what, advice) for sev, what, advice in _lag(facts))
    found.extend(Finding(query, sev, what, advice) for sev, what, advice in _memory(facts))
    found.extend(Finding(query, sev, what, advice) for sev, what, advice in retention_advice(facts))
    return found


def _desync(queue: str, desync: Mapping[str, Any], heal: str) -> list[tuple[Severity, str, str]]:
    if desync.get("removed_partitions"):
        return [_resharded(queue, desync)]
    if desync.get("problem"):
        return [(Severity.ACTION, f"{queue}: desync unknown: {desync['problem']}",
                 "fix the checkpoint location, queue or consumer named above (watch: / --queue / --consumer)")]
    consumer = desync.get("consumer")
    out = []
    by_state: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for partition, p in sorted((desync.get("partitions") or {}).items(), key=lambda item: int(item[0])):
        by_state.setdefault(p["state"], []).append((partition, p))
    if "lagging_one_batch" in by_state:
        parts = _names(by_state["lagging_one_batch"])
        out.append((Severity.INFO, f"{queue}: consumer {consumer} is one batch behind the checkpoint on {parts} "
                    "(the late acknowledgement of an idle query or an availableNow run; it holds the queue's trim)",
                    f"heal it: {heal}"))
    if "stuck" in by_state:
        rows = sum(p["difference_rows"] for _, p in by_state["stuck"])
        out.append((Severity.ACTION, f"{queue}: consumer {consumer} has not followed several committed batches on "
                    f"{_names(by_state['stuck'])} ({rows} rows behind)",
                    "its acknowledgements fail (look for consumer_advance_conflict in the query's log: is another "
                    f"job moving the same consumer?); then heal it: {heal}"))
    for partition, p in by_state.get("consumer_ahead", []):
        out.append((Severity.ACTION, f"{queue}: consumer {consumer} is ahead of the checkpoint on partition "
                    f"{partition}: rows [{p['checkpoint_next']}, {p['consumer_offset']}) would be skipped at restart",
                    "if another job read those rows, give each job its own consumer; if not, stop the query and move "
                    f"the consumer back to the checkpoint (opsd consumer seek {queue} {consumer} --partition "
                    f"{partition} --offset {p['checkpoint_next']}; a heal never moves a consumer backwards)"))
    ahead = by_state.get("checkpoint_ahead_of_queue", [])
    if ahead:
        rows = ", ".join(f"[{p['row_count']}, {p['checkpoint_next']}) of partition {n}" for n, p in ahead)
        out.append((Severity.ACTION, f"{queue}: the checkpoint has read past the queue's end on {_names(ahead)} (the "
                    "queue was recreated under this path, or the checkpoint is another queue's): rows "
                    f"{rows} would be skipped once written; the source refuses to read on (BeyondQueueEndError)",
                    "never healed: stop the query, move the consumer to the first row to read (opsd consumer seek "
                    f"{queue} {consumer} --offset 0) and restart the query with a new checkpointLocation"))
    for partition, p in by_state.get("consumer_ahead_of_queue", []):
        out.append((Severity.ACTION, f"{queue}: consumer {consumer} is past the queue's end on partition {partition}: "
                    f"offset {p['consumer_offset']}, but the queue has {p['row_count']} rows (moved by hand, or left "
                    "from a queue recreated under this path): the rows written below it would never be read",
                    f"stop the query and move the consumer back to the checkpoint (opsd consumer seek {queue} "
                    f"{consumer} --partition {partition} --offset {p['checkpoint_next']}), then restart it"))
    for partition, p in by_state.get("behind_trim", []):
        out.append((Severity.ACTION, f"{queue}: rows [{p['checkpoint_next']}, {p['trimmed_row_count']}) of partition "
                    f"{partition} were trimmed before the query read them: its next batch cannot be replayed",
                    f"register the consumer as vital (opsd consumer register {queue} {consumer} --vital) so trimming "
                    "waits for it, and restart the query with a new checkpointLocation (it starts at the consumer)"))
    return out


def _resharded(queue: str, desync: Mapping[str, Any]) -> tuple[Severity, str, str]:
    """Tablets the checkpoint has read were removed from the queue: the source refuses to go on
    (`QueueReshardedError`); only a new checkpoint, starting at the consumer, gets past it."""
    removed = ", ".join(str(p) for p in desync["removed_partitions"])
    return (Severity.ACTION, f"{queue}: the checkpoint has read partitions {removed}, which the queue no longer has "
            "(a reshard to fewer tablets): the query stops with QueueReshardedError",
            "restart the query with a new checkpointLocation: it starts where the consumer "
            f"{desync.get('consumer')} stands. To scale a queue under a running query, only add tablets "
            f"(opsd queue reshard {queue} --tablets N, N above the current count): they are read without a restart")


def _lag(facts: Mapping[str, Any]) -> list[tuple[Severity, str, str]]:
    lag = facts.get("lag") or {}
    if json_number(lag.get("time_to_drain_seconds")) != math.inf or not lag.get("backlog_rows"):
        return []
    cap = facts.get("max_rows_per_partition")
    now = f" (now {cap})" if cap else " (now unlimited)"
    arrive, read = _rate(lag.get("input_rows_per_second")), _rate(lag.get("processed_rows_per_second"))
    return [(Severity.ACTION, f"the backlog of {lag['backlog_rows']} rows is not draining: rows arrive at "
             f"{arrive}, the query reads {read}",
             f"raise max_rows_per_partition{now} in the query's tuning document (streaming_core.tuning.write_tuning) "
             "if batches are short, else give the query more executors or cores")]


def _memory(facts: Mapping[str, Any]) -> list[tuple[Severity, str, str]]:
    """The OOM check's verdict on the next batch (`opsd.checks.oom`): risk = predicted peak / the pool's limit."""
    risk = facts.get("oom_risk")
    if risk is None or risk < OOM_RISK_HIGH:
        return []
    safe, cap = facts.get("safe_max_rows_per_partition"), facts.get("max_rows_per_partition")
    safe_bytes, cap_bytes = facts.get("safe_max_bytes_per_partition"), facts.get("max_bytes_per_partition")
    if safe_bytes:
        advice = (f"set max_bytes_per_partition <= {safe_bytes} (now {cap_bytes or 'unlimited'}; it holds whatever "
                  f"the rows' width, max_rows_per_partition <= {safe} only at the width of the rows read last) in the "
                  "query's tuning document, or let the auto-tuner apply it (autotune.mode: apply)")
    elif safe:
        advice = (f"set max_rows_per_partition <= {safe} (now {cap or 'unlimited'}) in the query's tuning document, "
                  "or let the auto-tuner apply it (autotune.mode: apply)")
    else:
        advice = "give the query more memory (spark.driver.memory / executor memory): even a small batch is at risk"
    return [(Severity.ACTION, f"the next batch is predicted to need {risk:.0%} of a memory pool's limit "
             f"(opsd_oom_risk; 100% = out of memory)", advice)]


def _names(parts: list[tuple[str, Mapping[str, Any]]]) -> str:
    return "partition" + ("s " if len(parts) > 1 else " ") + ", ".join(p for p, _ in parts)


def _rate(value: float | None) -> str:
    return "? rows/s" if value is None else f"{value:.0f} rows/s"


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""

"""The auto-tuner's results (`opsd.checks.autotune`): the knobs it tunes, its modes, why it decided (`TuneReason`)
and a decision as the status keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from opsd.results.values import JsonValue, frozen_json, parsed


class Knob(StrEnum):
    """What the auto-tuner tunes: the source's caps per partition (rows, bytes) and the sink's rows per tablet
    transaction; each value is the key of the knob's field in the tuning document (`streaming_core.tuning`)."""

    MAX_ROWS = "max_rows_per_partition"
    MAX_BYTES = "max_bytes_per_partition"
    DYN_BATCH_SIZE = "dyn_batch_size"


class TunerMode(StrEnum):
    """What the auto-tuner does for a query (`autotune.mode`): nothing, recommend (status, metrics, history) or apply
    (writes the tuning document too)."""

    OFF = "off"
    RECOMMEND = "recommend"
    APPLY = "apply"


class Direction(StrEnum):
    UP = "up"
    DOWN = "down"
    HOLD = "hold"


class TuneReason(StrEnum):
    """Why the auto-tuner decided as it did (`opsd.checks.autotune.decide`): the `reason` label of its decisions
    counter, the value in `/status` and the log; `words` for people."""

    MEMORY_FAILURE = "memory_failure"
    REPLAN_REFUSED = "replan_refused"
    OOM_RISK = "oom_risk"
    STABILISING = "stabilising"
    FIRST_BATCH_SAFE = "first_batch_safe"
    START_UNKNOWN_RISK = "start_unknown_risk"
    SAFE_CAP = "safe_cap"
    NO_BATCHES = "no_batches"
    CAP_NOT_BINDING = "cap_not_binding"
    NO_BACKLOG = "no_backlog"
    FAST_BATCHES = "fast_batches"
    SLOW_BATCHES = "slow_batches"
    WITHIN_TARGET = "within_target"
    NO_NEW_WRITES = "no_new_writes"
    FAILED_CALLS = "failed_calls"
    SLOW_CALLS = "slow_calls"
    TASKS_FAILED_ELSEWHERE = "tasks_failed_elsewhere"
    CALL_SIZE_TRIED = "call_size_tried"
    CALL_SIZE_BEST = "call_size_best"
    CALL_SIZE_SETTLED = "call_size_settled"
    CALLS_NEAR_SLOW = "calls_near_slow"
    CALLS_NOT_FULL = "calls_not_full"
    NO_MEMORY_MODEL = "no_memory_model"
    MEMORY_BOUND = "memory_bound"
    MEMORY_HEADROOM = "memory_headroom"
    WITHIN_SAFE_CAP = "within_safe_cap"
    PER_BATCH_COSTS_BIND = "per_batch_costs_bind"
    BATCH_COSTS_BIND = "batch_costs_bind"
    READS_BIND = "reads_bind"
    DECODE_BINDS = "decode_binds"
    TRANSFORM_BINDS = "transform_binds"
    INSERTS_BIND = "inserts_bind"
    SLOW_CALLS_INSERTS_BIND = "slow_calls_inserts_bind"
    CALL_SIZE_TRIED_INSERTS_BIND = "call_size_tried_inserts_bind"

    @property
    def words(self) -> str:
        return TUNE_REASON_WORDS[self]


#: Each reason in words.
TUNE_REASON_WORDS: Mapping[TuneReason, str] = {
    TuneReason.MEMORY_FAILURE: "the query failed of memory: cut",
    TuneReason.REPLAN_REFUSED: "the failed batch replays with its planned range",
    TuneReason.OOM_RISK: "the next batch risks running out of memory",
    TuneReason.STABILISING: "waiting for batches since the last change",
    TuneReason.FIRST_BATCH_SAFE: "no cap yet: a safe first cap",
    TuneReason.START_UNKNOWN_RISK: "no batch measured and no memory model: start at the safe first cap and grow",
    TuneReason.SAFE_CAP: "the cap is over the OOM check's safe cap",
    TuneReason.NO_BATCHES: "no batch to judge yet",
    TuneReason.CAP_NOT_BINDING: "the cap is not what limits batches",
    TuneReason.NO_BACKLOG: "no backlog to drain faster",
    TuneReason.FAST_BATCHES: "batches are fast and capped: raise",
    TuneReason.SLOW_BATCHES: "batches are over the target time: cut",
    TuneReason.WITHIN_TARGET: "batches meet the target",
    TuneReason.NO_NEW_WRITES: "no new writes to judge",
    TuneReason.FAILED_CALLS: "insert calls failed or retried: halve",
    TuneReason.SLOW_CALLS: "insert calls are slow: halve",
    TuneReason.TASKS_FAILED_ELSEWHERE: "tasks failed outside the writes: no evidence",
    TuneReason.CALL_SIZE_TRIED: "insert calls are full: trying another rows per call (the insert seconds per row "
                                "measured at each size decide)",
    TuneReason.CALL_SIZE_BEST: "back to the rows per call with the fewest insert seconds per row measured",
    TuneReason.CALL_SIZE_SETTLED: "the rows per call with the fewest insert seconds per row, its neighbours tried",
    TuneReason.CALLS_NEAR_SLOW: "insert calls are near the slow limit: no larger ones",
    TuneReason.CALLS_NOT_FULL: "insert calls are not full",
    TuneReason.NO_MEMORY_MODEL: "no memory model yet: no safe byte cap",
    TuneReason.MEMORY_BOUND: "no byte cap yet: the OOM check's safe byte cap",
    TuneReason.MEMORY_HEADROOM: "memory has room: raise toward the safe byte cap",
    TuneReason.WITHIN_SAFE_CAP: "the byte cap is within the safe byte cap",
    TuneReason.PER_BATCH_COSTS_BIND: "batches are fast and capped, and per-batch costs bind (planning, commits, "
                                     "Spark's trigger): raise",
    TuneReason.BATCH_COSTS_BIND: "per-batch costs bind (planning, commits, Spark's trigger): this knob does not help",
    TuneReason.READS_BIND: "waiting for the cluster's reads binds: this knob does not help",
    TuneReason.DECODE_BINDS: "decoding rows binds: this knob does not help",
    TuneReason.TRANSFORM_BINDS: "the transformation binds: this knob does not help",
    TuneReason.INSERTS_BIND: "the sink's inserts bind: the read cap does not help",
    TuneReason.SLOW_CALLS_INSERTS_BIND: "insert calls are slow and the sink's inserts bind: halve",
    TuneReason.CALL_SIZE_TRIED_INSERTS_BIND: "the sink's inserts bind and their calls are full: trying another rows "
                                             "per call (the insert seconds per row measured at each size decide)",
}


class ReplanRefusal(StrEnum):
    """Why a failed run's planned batch is left to replay with its logged range instead of planned again under a cut
    cap (`opsd.checks.autotune.collect`): planning it again could lose or duplicate output."""

    NO_CHECKPOINT = "no_checkpoint"
    STATEFUL = "stateful"
    SINK_OPTIONS_UNREADABLE = "sink_options_unreadable"
    FOREACH_BATCH = "foreach_batch"
    FILE_SINK = "file_sink"
    SINK_COMMITTED = "sink_committed"

    @property
    def words(self) -> str:
        return REPLAN_REFUSAL_WORDS[self]


#: Each refusal in words.
REPLAN_REFUSAL_WORDS: Mapping[ReplanRefusal, str] = {
    ReplanRefusal.NO_CHECKPOINT: "no checkpoint location: a restart plans every batch anew",
    ReplanRefusal.STATEFUL: "the query keeps state, which the failed batch may have changed",
    ReplanRefusal.SINK_OPTIONS_UNREADABLE: "the yt sink's options do not parse",
    ReplanRefusal.FOREACH_BATCH: "a foreachBatch function may rely on Spark's promise that a replayed batch id has "
                                 "the same rows",
    ReplanRefusal.FILE_SINK: "Spark's file sink log may hold the batch's output already",
    ReplanRefusal.SINK_COMMITTED: "the sink committed the batch before the query failed",
}


@dataclass(frozen=True)
class Decision:
    """One knob's decision: the value recommended (the current one when holding) and why (`inputs`: what it was
    decided from, for the log)."""

    query: str
    knob: Knob
    current: int | None
    recommended: int | None
    reason: TuneReason
    inputs: Mapping[str, JsonValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", frozen_json(self.inputs))

    @property
    def direction(self) -> Direction:
        if self.recommended is None or self.recommended == self.current:
            return Direction.HOLD
        return Direction.UP if self.current is None or self.recommended > self.current else Direction.DOWN


@dataclass(frozen=True)
class TunerDecision:
    """A decision as the status keeps it: the tuner's mode, whether it was applied, the knob's configured bounds and
    when it was made (None: not recorded, e.g. the doctor's recommendation)."""

    decision: Decision
    mode: TunerMode
    applied: bool
    bounds: tuple[int, int]
    at: float | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], query: str, knob: Knob) -> TunerDecision:
        """The inverse of `to_json` (the query and the knob name its entry; what it was decided from stays in the
        log, not in `/status`)."""
        decision = Decision(query, knob, parsed(int | None, doc.get("current")),
                            parsed(int | None, doc.get("recommended")), TuneReason(doc["reason"]))
        return cls(decision, TunerMode(doc["mode"]), parsed(bool, doc["applied"]),
                   parsed(tuple[int, int], doc["bounds"]), parsed(float | None, doc.get("at")))

    def to_json(self) -> Mapping[str, Any]:
        d = self.decision
        found = {"current": d.current, "recommended": d.recommended, "direction": d.direction, "reason": d.reason,
                 "mode": self.mode, "applied": self.applied, "bounds": self.bounds}
        return found if self.at is None else {**found, "at": self.at}

"""What the checks find, as the frozen types the status store keeps and the checks hand each other: a queue's
offset desync and its last heal, a query's lag, an auto-tuner decision, the OOM check's verdict, the trim forecast of a
queue and the audit of its vital consumers.

The checks' evaluate and decide steps build these; the recorder stores them; the readers (the OOM check, the
auto-tuner, the doctor, `opsd status`, the demo) read their fields. Each type's `to_json` gives its entry of the
`/status` document (values may still be floats, enums, nested types: `opsd.observe.status.jsonable` finishes them),
so JSON is made at the edge only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from opsd.observe.positions import PartitionPositions, QueuePositions
from opsd.observe.values import JsonValue, frozen_json, frozen_mapping
from streaming_core.auto_trim import AutoTrimConfig

# --- offset desync ------------------------------------------------------------------------------------------------


class DesyncState(StrEnum):
    IN_SYNC = "in_sync"
    LAGGING_ONE_BATCH = "lagging_one_batch"
    STUCK = "stuck"
    CONSUMER_AHEAD = "consumer_ahead"
    BEHIND_TRIM = "behind_trim"
    CONSUMER_AHEAD_OF_QUEUE = "consumer_ahead_of_queue"
    CHECKPOINT_AHEAD_OF_QUEUE = "checkpoint_ahead_of_queue"


    @property
    def words(self) -> str:
        """The state for people (`opsd doctor`, `opsd desync show`); JSON and metrics keep the value."""
        return DESYNC_WORDS[self]


#: Each state in words (see `opsd.checks.desync.evaluate` for what each means).
DESYNC_WORDS: Mapping[DesyncState, str] = {
    DesyncState.IN_SYNC: "in sync",
    DesyncState.LAGGING_ONE_BATCH: "one batch behind (late acknowledgement, harmless)",
    DesyncState.STUCK: "stuck: several batches not acknowledged",
    DesyncState.CONSUMER_AHEAD: "consumer ahead of the checkpoint: rows would be skipped",
    DesyncState.BEHIND_TRIM: "checkpoint behind the trim: its rows are gone",
    DesyncState.CONSUMER_AHEAD_OF_QUEUE: "consumer past the queue's end",
    DesyncState.CHECKPOINT_AHEAD_OF_QUEUE: "checkpoint past the queue's end",
}
#: Every state, in rising severity (the metric's one-hot `state` label takes these values).
STATES: tuple[DesyncState, ...] = tuple(DesyncState)
#: States whose offsets lie past the queue's end: alerted, never healed.
AHEAD_OF_QUEUE = frozenset({DesyncState.CONSUMER_AHEAD_OF_QUEUE, DesyncState.CHECKPOINT_AHEAD_OF_QUEUE})


@dataclass(frozen=True)
class PartitionDesync:
    """A partition's state; `difference_rows` = checkpoint's next row - consumer offset (< 0: consumer ahead)."""

    facts: PartitionPositions
    state: DesyncState

    @property
    def difference_rows(self) -> int:
        return self.facts.checkpoint_next - self.facts.consumer_offset

    def to_json(self) -> Mapping[str, Any]:
        f = self.facts
        return {"state": self.state, "difference_rows": self.difference_rows, "checkpoint_next": f.checkpoint_next,
                "consumer_offset": f.consumer_offset, "row_count": f.row_count,
                "trimmed_row_count": f.trimmed_row_count, "added": f.added}


@dataclass(frozen=True)
class QueueDesync:
    """A queue of a query with its partitions' states."""

    facts: QueuePositions
    partitions: tuple[PartitionDesync, ...]

    @property
    def state(self) -> DesyncState | None:
        """The worst partition's state; None when nothing could be judged (see `facts.problem`)."""
        return max(self.partitions, key=lambda p: STATES.index(p.state)).state if self.partitions else None

    @property
    def idle(self) -> bool:
        """Nothing is written past the checkpoint: the query has no next batch to plan."""
        return all(p.facts.row_count <= p.facts.checkpoint_next for p in self.partitions)

    def to_json(self) -> Mapping[str, Any]:
        f = self.facts
        return {"consumer": f.consumer, "vital": f.vital, "source": f.source, "state": self.state,
                "committed_batch": f.committed_batch, "planned_batch": f.planned_batch, "problem": f.problem,
                "removed_partitions": f.removed_partitions,
                "partitions": {p.facts.partition: p for p in self.partitions}}


class HealOutcome(StrEnum):
    """What became of a heal: the `outcome` label of the heals counter."""

    HEALED = "healed"
    NOTHING_TO_HEAL = "nothing_to_heal"
    NO_COMMITTED_BATCH = "refused_no_committed_batch"
    MISMATCH = "refused_checkpoint_mismatch"
    AHEAD_OF_QUEUE = "refused_ahead_of_queue"
    BEHIND_TRIM = "refused_behind_trim"
    CONSUMER_AHEAD = "refused_consumer_ahead"
    BATCH_RUNNING = "refused_batch_running"
    QUERY_BUSY = "refused_query_busy"
    CONFLICT = "conflict"
    FAILED = "failed"

    @property
    def words(self) -> str:
        """The outcome for people (`opsd desync heal`); metrics, logs and `/status` keep the value."""
        return HEAL_WORDS[self]


#: Each outcome in words.
HEAL_WORDS: Mapping[HealOutcome, str] = {
    HealOutcome.HEALED: "healed: the consumer moved to the committed batch's end",
    HealOutcome.NOTHING_TO_HEAL: "nothing to heal: the consumer is at the committed batch's end",
    HealOutcome.NO_COMMITTED_BATCH: "refused: the checkpoint has no committed batch yet",
    HealOutcome.MISMATCH: "refused: the checkpoint does not match this queue",
    HealOutcome.AHEAD_OF_QUEUE: "refused: the checkpoint or the consumer is past the queue's end",
    HealOutcome.BEHIND_TRIM: "refused: the checkpoint is behind the queue's trim",
    HealOutcome.CONSUMER_AHEAD: "refused: the consumer is ahead of the checkpoint (a heal never moves it back)",
    HealOutcome.BATCH_RUNNING: "waiting: a batch is running (planned, not committed)",
    HealOutcome.QUERY_BUSY: "waiting: the running query has rows to read; its next batch acknowledges this one",
    HealOutcome.CONFLICT: "conflict: another writer moved the consumer meanwhile",
    HealOutcome.FAILED: "failed: the consumer could not be advanced",
}


@dataclass(frozen=True)
class Heal:
    """A heal of a queue's consumer (`opsd.checks.desync`): its outcome, when, and the moves made,
    `{partition: (old, new)}`."""

    outcome: HealOutcome
    at: float
    moves: Mapping[int, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "moves", frozen_mapping(self.moves))

    def to_json(self) -> Mapping[str, Any]:
        return {"outcome": self.outcome, "at": self.at, "moves": self.moves}


@dataclass(frozen=True)
class DesyncEntry:
    """What the status keeps per queue: the latest desync (None before the first) and the last heal."""

    desync: QueueDesync | None = None
    last_heal: Heal | None = None

    def to_json(self) -> Mapping[str, Any]:
        return {**(self.desync.to_json() if self.desync else {}), "last_heal": self.last_heal}


# --- lag ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    queue: str
    partition: int
    unread_rows: int
    lag_seconds: float | None


@dataclass(frozen=True)
class QueryLag:
    """A query's lag: per partition, and the smoothed rates; time to drain is +Inf when it is not draining."""

    query: str
    partitions: tuple[PartitionLag, ...]
    input_rows_per_second: float | None
    processed_rows_per_second: float | None

    @property
    def backlog_rows(self) -> int:
        return sum(p.unread_rows for p in self.partitions)

    @property
    def time_to_drain_seconds(self) -> float | None:
        """None until two samples give the rates."""
        if self.backlog_rows == 0:
            return 0.0
        if self.input_rows_per_second is None or self.processed_rows_per_second is None:
            return None
        net = self.processed_rows_per_second - self.input_rows_per_second
        return self.backlog_rows / net if net > 0 else float("inf")

    @property
    def max_lag_seconds(self) -> float | None:
        known = [p.lag_seconds for p in self.partitions if p.lag_seconds is not None]
        return max(known) if known else None

    def to_json(self) -> Mapping[str, Any]:
        queues: dict[str, dict[int, Mapping[str, Any]]] = {}
        for p in self.partitions:
            queues.setdefault(p.queue, {})[p.partition] = {"unread_rows": p.unread_rows, "lag_seconds": p.lag_seconds}
        return {"backlog_rows": self.backlog_rows, "time_to_drain_seconds": self.time_to_drain_seconds,
                "input_rows_per_second": self.input_rows_per_second,
                "processed_rows_per_second": self.processed_rows_per_second, "queues": queues}


# --- the auto-tuner -----------------------------------------------------------------------------------------------


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
    FAST_FULL_CALLS = "fast_full_calls"
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
    FULL_CALLS_INSERTS_BIND = "full_calls_inserts_bind"

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
    TuneReason.FAST_FULL_CALLS: "insert calls are fast and full: grow",
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
    TuneReason.FULL_CALLS_INSERTS_BIND: "insert calls are fast and full, and the sink's inserts bind: grow",
}


def in_words(kind: type[DesyncState | TuneReason], value: str) -> str:
    """A state or reason read from a document (`/status`, the doctor's facts) in words; a value this version does
    not know (a newer daemon's), as it is."""
    return kind(value).words if value in kind._value2member_map_ else value


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

    def to_json(self) -> Mapping[str, Any]:
        d = self.decision
        found = {"current": d.current, "recommended": d.recommended, "direction": d.direction, "reason": d.reason,
                 "mode": self.mode, "applied": self.applied, "bounds": self.bounds}
        return found if self.at is None else {**found, "at": self.at}


# --- OOM risk -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolVerdict:
    """One memory pool's verdict for the next batch: the expected peak, its interval at the confidence, the
    probability it passes the limit, the baseline, the last observed peak, how many batches the fit saw and what
    measured the pool (`sampler` or `spark_metrics`)."""

    pool: str
    risk: float
    predicted_peak_bytes: float
    peak_interval_bytes: tuple[float, float]
    exceed_probability: float
    limit_bytes: float
    baseline_bytes: float
    observed_peak_bytes: float | None
    observations: int
    measured_by: str

    def to_json(self) -> Mapping[str, Any]:
        return {"risk": self.risk, "predicted_peak_bytes": self.predicted_peak_bytes,
                "peak_interval_bytes": self.peak_interval_bytes, "exceed_probability": self.exceed_probability,
                "limit_bytes": self.limit_bytes, "baseline_bytes": self.baseline_bytes,
                "observed_peak_bytes": self.observed_peak_bytes, "observations": self.observations,
                "measured_by": self.measured_by}


@dataclass(frozen=True)
class OomVerdict:
    """The OOM check's verdict for a query's next batch, over its pools."""

    risk: float
    confidence: float
    exceed_probability: float
    batch_bytes: float
    safe_max_rows_per_partition: int | None
    pools: tuple[PoolVerdict, ...] = ()
    safe_max_bytes_per_partition: int | None = None

    def to_json(self) -> Mapping[str, Any]:
        return {"risk": self.risk, "confidence": self.confidence, "exceed_probability": self.exceed_probability,
                "batch_bytes": self.batch_bytes, "safe_max_rows_per_partition": self.safe_max_rows_per_partition,
                "safe_max_bytes_per_partition": self.safe_max_bytes_per_partition,
                "pools": {p.pool: p for p in self.pools}}


# --- decision history -----------------------------------------------------------------------------------------------


class HistoryOutcome(StrEnum):
    """What became of a tuner's or a replan's decision (a heal's outcome is its `HealOutcome`)."""

    APPLIED = "applied"
    RECOMMENDED = "recommended"
    REPLANNED = "replanned"
    REFUSED = "refused"


class HistoryKind(StrEnum):
    """Who decided: the auto-tuner (a knob), a heal (a queue's consumer), a replan (a failed run's planned batch)."""

    TUNER = "tuner"
    HEAL = "heal"
    REPLAN = "replan"


@dataclass(frozen=True)
class HistoryEntry:
    """One decision as the history table keeps it (`opsd.checks.history`): what was decided about (`subject`: the
    knob, the queue, the batch), its outcome (a `HistoryOutcome`, or a heal's `HealOutcome`), why (a `TuneReason`'s
    or `HealOutcome`'s value, or why a replan was refused), the values before and after, what it was decided from,
    and when (unix seconds, the deciding check's clock). `before`, `after` and `inputs` hold JSON values: they leave
    the process as JSON text in the table's rows."""

    query: str
    at: float
    kind: HistoryKind
    subject: str
    outcome: HistoryOutcome | HealOutcome
    reason: str
    before: JsonValue = None
    after: JsonValue = None
    inputs: Mapping[str, JsonValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "before", frozen_json(self.before))
        object.__setattr__(self, "after", frozen_json(self.after))
        object.__setattr__(self, "inputs", frozen_json(self.inputs))

    @staticmethod
    def outcome_of(value: str) -> HistoryOutcome | HealOutcome:
        """An outcome read back from a history row; `ValueError` when it is none of them."""
        return HistoryOutcome(value) if value in HistoryOutcome._value2member_map_ else HealOutcome(value)

    def to_json(self) -> Mapping[str, Any]:
        return {"query": self.query, "at": self.at, "kind": self.kind, "subject": self.subject,
                "outcome": self.outcome, "reason": self.reason, "before": self.before, "after": self.after,
                "inputs": self.inputs}


# --- Queue Agent signals --------------------------------------------------------------------------------------------


class Disposition(StrEnum):
    """Where a consumer's offset stands in a partition's window of rows, as YTsaurus' Queue Agent names it."""

    UP_TO_DATE = "up_to_date"
    PENDING_CONSUMPTION = "pending_consumption"
    EXPIRED = "expired"
    AHEAD = "ahead"


@dataclass(frozen=True)
class PartitionSignals:
    """One partition of a query's queue as its consumer sees it: rows written per second, rows the consumer has not
    read, its disposition and its processing lag (the age of its next row); None where neither the Queue Agent nor
    opsd's own measurements tell."""

    partition: int
    write_rows_per_second: float | None
    unread_rows: int | None
    disposition: Disposition | None
    processing_lag_seconds: float | None


@dataclass(frozen=True)
class QueueSignals:
    """A query's queue and consumer: the Queue Agent's signals where it serves them (`served`), else opsd's own
    measurements (the queue's row counts between two readings, the consumer's offset, the lag check's lag)."""

    query: str
    queue: str
    consumer: str
    served: bool
    write_rows_per_second: float | None
    partitions: tuple[PartitionSignals, ...] = ()

    def to_json(self) -> Mapping[str, Any]:
        return {"consumer": self.consumer, "served": self.served, "write_rows_per_second": self.write_rows_per_second,
                "partitions": {p.partition: {"write_rows_per_second": p.write_rows_per_second,
                                             "unread_rows": p.unread_rows, "disposition": p.disposition,
                                             "processing_lag_seconds": p.processing_lag_seconds}
                               for p in self.partitions}}


# --- trim forecast ------------------------------------------------------------------------------------------------


class TrimOutlook(StrEnum):
    """Why a partition's trim forecast is what it is (`opsd.checks.trim.evaluate`)."""

    NO_AUTO_TRIM = "no_auto_trim"  # no @auto_trim_config, or enable is false: nothing trims on its own
    # the queue asks for trimming, but the cluster's Queue Agent has automatic trimming switched off
    # (`//sys/queue_agents/config`: queue_agent/controller/enable_automatic_trimming, off by default): nothing trims
    CLUSTER_TRIMMING_OFF = "cluster_trimming_off"
    NO_VITAL_CONSUMER = "no_vital_consumer"  # the Queue Agent trims only up to vital consumers: with none, not at all
    CONSUMER_VITAL = "consumer_vital"  # the query's own consumer is vital: trimming waits for it
    NOT_APPROACHING = "not_approaching"  # at the current rates the trim point never reaches the next row to read
    APPROACHING = "approaching"  # it reaches it in `eta_seconds`
    PENDING = "pending"  # it is past it already: the next pass of the Queue Agent deletes unread rows
    UNKNOWN = "unknown"  # rates (two readings) or the next row's age are not known yet


#: The trim rule that holds unread rows longest, so the one to change to keep them (`binding`).
TRIM_RULES = ("vital_consumers", "retained_rows", "retained_lifetime_duration")


@dataclass(frozen=True)
class PartitionTrim:
    """A partition's trim forecast: seconds until trimming deletes rows the query has not read (0: now; +Inf: not at
    the current rates; None: unknown), the rule that holds them longest (`binding`, one of `TRIM_RULES`), the rates
    it was judged by, and whether it is below the level a person must act at (`at_risk`, set by the decide step)."""

    queue: str
    partition: int
    outlook: TrimOutlook
    eta_seconds: float | None
    unread_rows: int
    binding: str | None = None
    write_rows_per_second: float | None = None
    read_rows_per_second: float | None = None
    at_risk: bool = False

    def to_json(self) -> Mapping[str, Any]:
        return {"outlook": self.outlook, "eta_seconds": self.eta_seconds, "at_risk": self.at_risk,
                "unread_rows": self.unread_rows, "binding": self.binding,
                "write_rows_per_second": self.write_rows_per_second,
                "read_rows_per_second": self.read_rows_per_second}


@dataclass(frozen=True)
class QueueTrim:
    """A query's queue: its trimming config, its consumer and each partition's forecast; `problem` when the queue's
    retention could not be read."""

    query: str
    queue: str
    consumer: str
    auto_trim: AutoTrimConfig | None
    partitions: tuple[PartitionTrim, ...] = ()
    problem: str | None = None

    @property
    def eta_seconds(self) -> float | None:
        """The soonest partition's; None when none is known."""
        known = [p.eta_seconds for p in self.partitions if p.eta_seconds is not None]
        return min(known) if known else None

    def to_json(self) -> Mapping[str, Any]:
        return {"consumer": self.consumer, "auto_trim_config": self.auto_trim.to_yt() if self.auto_trim else None,
                "eta_seconds": self.eta_seconds, "problem": self.problem,
                "partitions": {p.partition: p for p in self.partitions}}


# --- vital consumers ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VitalConsumerAudit:
    """A consumer registered as vital for a queue a query reads (the query's own or another job's): the rows waiting
    for it, how long opsd has seen it stand still while rows wait (0 while it advances or nothing waits;
    `since`: from when), the partitions it holds back, and whether that is past the level to act at (`stalled`, set
    by the decide step)."""

    queue: str
    consumer: str
    waiting_rows: int
    stalled_seconds: float
    since: float | None
    offsets: Mapping[int, int] = field(default_factory=dict)
    own: bool = False
    stalled: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", frozen_mapping(self.offsets))

    def to_json(self) -> Mapping[str, Any]:
        return {"queue": self.queue, "consumer": self.consumer, "own": self.own, "waiting_rows": self.waiting_rows,
                "stalled_seconds": self.stalled_seconds, "since": self.since, "stalled": self.stalled,
                "offsets": self.offsets}


# --- the cycle ------------------------------------------------------------------------------------------------------


class StepOutcome(StrEnum):
    """How a step of the cycle ended (`opsd.checks.cycle`)."""

    OK = "ok"
    FAILED = "failed"  # it raised: counted in opsd_check_errors_total, logged as cycle_step_failed
    SLOW = "slow"  # it outran the cycle's interval: left to finish on its thread, the cycle went on
    STILL_RUNNING = "still_running"  # its previous run had not finished: not started again


@dataclass(frozen=True)
class StepTrace:
    """One step of a cycle: when it started and ended (unix seconds; a slow step's end is when the cycle stopped
    waiting), the time of the reading it evaluated, and how it ended."""

    step: str
    started_at: float
    ended_at: float
    reading_at: float
    outcome: StepOutcome


@dataclass(frozen=True)
class CycleTrace:
    """One cycle of the position checks: its start and end, when its one reading of the world was taken, and its
    steps in their order (the reading first, as `positions`)."""

    started_at: float
    ended_at: float
    reading_at: float
    steps: tuple[StepTrace, ...] = ()

    @property
    def duration_seconds(self) -> float:
        return self.ended_at - self.started_at


"""An interleaving sweep of one check cycle against a cluster that changes under it, as it does in normal operation.

A world (`World`): one job on the embedded cluster (a 2-partition queue with `$timestamp`, its consumer one batch
behind its committed checkpoint and rows after it, its last batch in the status, another job's vital consumer, the
queue's `@auto_trim_config`, a tuning document), built once and copied for every run. `Change` is one normal change of
that world: a Queue Agent trim, rows appended (and read at once by another job), a reshard to more tablets, the query
planning or committing its next batch (and acknowledging the last one on its consumer), another job's consumer
unregistered and removed, a person rewriting the tuning document.

`sweep` runs the registry's cycle (`opsd.checks.registry.build_checks`: every position check, the heal, the OOM check
and the tuner in mode apply) once on the world unchanged, counting its cluster calls, once on the changed world, and
then once per
N with the change made right before the cycle's Nth cluster call (`Interleaved`, a cluster that counts the calls made
through it and runs the change before the Nth). Each run's `Outcome` holds what the cycle found and did; a consistent
cycle finds what it finds before or after the change, never a mixture. A run is not made anew where it cannot differ
from the one before it (`unseen`: the call between them only read, and answered as on the unchanged world).
"""

from __future__ import annotations

import copy
import functools
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

import streaming_core.cluster
from opsd.checks.registry import SparkMemory, build_checks
from opsd.config.models import ChecksSettings, OpsdConfig
from opsd.observe.progress import PartitionOffsets
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.cycle import StepOutcome
from opsd.telemetry.metrics import Metrics
from streaming_core.auto_trim import AUTO_TRIM_ATTRIBUTE, AutoTrimConfig
from streaming_core.cluster import Cluster
from streaming_core.cluster.embedded.auto_trimmer import AutoTrimmer
from streaming_core.consumer import advance_consumer
from streaming_core.tuning import default_tuning_path, write_tuning
from tests.support.checkpoint import write_checkpoint
from tests.support.cluster import QUEUE_SCHEMA

_connect = streaming_core.cluster.connect
QUEUE, CONSUMER, OTHER = "//job/queue", "//job/consumer", "//other/consumer"
QUERY = "job"
#: Rows per partition, the committed batches' ends (last row read) and where the consumer stands; the rows per
#: partition the queue's auto-trim keeps: a trim reaches the query's next row.
ROWS, BATCHES, CONSUMER_AT, KEEP_ROWS = 25, {0: 9, 1: 19}, 10, 3
#: Log events that say a cycle did not hold up under a change (each a step or a part of one that failed).
#: The last batch the query ran, as its progress told the status: rows 10..19 of each partition, 5 more waiting.
LAST_BATCH = tuple(PartitionOffsets(QUEUE, p, CONSUMER_AT - 1, BATCHES[max(BATCHES)], BATCHES[max(BATCHES)] + 5)
                   for p in (0, 1))
#: Cluster calls that only read and return plain values (comparable, copied): a change that leaves such a call's answer
#: as it was cannot make the run that changes the world before it differ from the run that changes it after it.
PLAIN_READS = frozenset({"exists", "get", "list", "get_schema", "get_tablet_infos", "get_consumer_offsets",
                         "list_queue_consumer_registrations", "automatic_trimming", "queue_agent_attribute",
                         "select_rows", "lookup_rows", "node_info"})
FAILED_EVENTS = ("cycle_step_failed", "desync_collect_failed", "desync_heal_failed", "retention_collect_failed",
                 "queue_agent_collect_failed", "autotune_failed", "history_append_failed")


class NoStages:
    """A Spark UI that has seen no stages: the OOM check judges by the rows it samples and its prior."""

    def stages(self) -> list:
        return []


class Calls:
    """The cluster calls of one cycle, by name, and the change made right before the `change_before`th (None: never):
    before the first, it comes between the checkpoints' reads and the cluster's. With `before_each`, the change is made
    before every call of that name instead."""

    def __init__(self, change: Callable[[], None] | None = None, change_before: int | None = None, *,
                 before_each: str | None = None) -> None:
        self.names: list[str] = []
        #: What each call returned where it only reads and returns plain values (else a value equal to nothing).
        self.results: list[Any] = []
        self.change, self.change_before, self.before_each = change, change_before, before_each
        #: The change's own failure (the world's fault, never the cycle's: kept apart from the cycle's errors).
        self.error: Exception | None = None

    def making(self, name: str) -> None:
        self.names.append(name)
        due = name == self.before_each if self.before_each else len(self.names) == self.change_before
        if due and self.change is not None:
            try:
                self.change()
            except Exception as e:  # reported as the run's failure, not raised into the cycle's call
                self.error = e

    def made(self, name: str, result: Any, *, answered: bool = True) -> None:
        self.results.append(copy.deepcopy(result) if answered and name in PLAIN_READS else object())


class Interleaved:
    """A cluster whose public calls are counted in `calls` (the change runs right before the one it waits for; calls
    inside a tablet transaction are not counted: a change there would wait for the transaction's lock)."""

    def __init__(self, inner: Cluster, calls: Calls) -> None:
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls.making(name)
            try:
                result = value(*args, **kwargs)
            except Exception:
                self._calls.made(name, None, answered=False)
                raise
            self._calls.made(name, result)
            return result
        return call

    def __enter__(self) -> Interleaved:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


def interleave(monkeypatch: pytest.MonkeyPatch, calls: Calls) -> None:
    """Every module of opsd and the connector that opens clusters opens `Interleaved` ones counting in `calls`."""
    def connect(uri: str | None = None, **options: Any) -> Interleaved:
        return Interleaved(_connect(uri, **options), calls)

    for module in _connecting_modules():
        monkeypatch.setattr(module, "connect", connect)


@functools.cache
def _connecting_modules() -> tuple[ModuleType, ...]:
    """The modules of opsd and the connector that open clusters (all imported once this module is: it builds the
    registry's checks)."""
    return tuple(m for m in list(sys.modules.values())
                 if getattr(m, "__name__", "").startswith(("opsd.", "streaming_core."))
                 and getattr(m, "connect", None) is _connect)


@dataclass(frozen=True)
class World:
    """One copy of the world: its cluster and the job's checkpoint."""

    root: Path

    @property
    def uri(self) -> str:
        return f"local://{self.root / 'cluster'}"

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    def copy(self, to: Path) -> World:
        shutil.copytree(self.root, to)
        return World(to)

    def config(self) -> OpsdConfig:
        return OpsdConfig.model_validate({"cluster": self.uri, "checks": {"heal": True}, "pipelines": [
            {"name": QUERY, "source": {"path": QUEUE, "options": {"consumer_path": CONSUMER}},
             "sink": {"format": "console"}, "checkpoint_location": str(self.checkpoint)}]})


def build_world(root: Path, rows: int = ROWS) -> World:
    """The world with `rows` rows per partition (the committed checkpoint ends at row 20: with 20 the query is idle)."""
    world = World(root)
    with _connect(world.uri) as cluster:
        cluster.create("table", QUEUE, recursive=True, attributes={
            "dynamic": True, "tablet_count": 2, "schema": [{"name": "$timestamp", "type": "uint64"}, *QUEUE_SCHEMA]})
        cluster.insert_rows(QUEUE, [{"data": "x", "n": i, "$tablet_index": p} for p in (0, 1) for i in range(rows)])
        for consumer, at, vital in ((CONSUMER, CONSUMER_AT, False), (OTHER, rows, True)):
            cluster.create_consumer(consumer, recursive=True)
            cluster.register_queue_consumer(QUEUE, consumer, vital=vital)
            for p in (0, 1):
                cluster.advance_consumer(consumer, QUEUE, p, None, at)
        cluster.set(f"{QUEUE}/@{AUTO_TRIM_ATTRIBUTE}", AutoTrimConfig(True, KEEP_ROWS).to_yt())
        write_tuning(cluster, default_tuning_path(CONSUMER), max_rows_per_partition=100, reason="set by a person")
    write_checkpoint(world.checkpoint, QUEUE, {b: {0: end, 1: end} for b, end in BATCHES.items()}, max(BATCHES),
                     consumer=CONSUMER)
    return world


@dataclass(frozen=True)
class Change:
    """One normal change of a world (of `rows` rows per partition); `running`: the query runs meanwhile (else it
    stopped, and opsd may heal it)."""

    name: str
    make: Callable[[Cluster, World], None]
    running: bool = False
    rows: int = ROWS

    def __str__(self) -> str:
        return self.name


def _trim(cluster: Cluster, world: World) -> None:
    """The Queue Agent's pass: the queue keeps its last `KEEP_ROWS` rows (its vital consumer has read them all)."""
    AutoTrimmer(cluster).run_pass([QUEUE])


def _append(cluster: Cluster, world: World) -> None:
    cluster.insert_rows(QUEUE, [{"data": "y", "n": i, "$tablet_index": p} for p in (0, 1) for i in range(5)])


def _reshard(cluster: Cluster, world: World) -> None:
    cluster.reshard(QUEUE, 3)


def _planned(cluster: Cluster, world: World) -> None:
    """The query plans its next batch (`offsets/N`), then acknowledges the last one on its consumer (the source's
    own advance: a consumer healed there already stays)."""
    batches = {**BATCHES, max(BATCHES) + 1: ROWS - 1}
    write_checkpoint(world.checkpoint, QUEUE, {b: {0: end, 1: end} for b, end in batches.items()}, max(BATCHES),
                     consumer=CONSUMER)
    advance_consumer(cluster, CONSUMER, QUEUE, dict.fromkeys((0, 1), BATCHES[max(BATCHES)] + 1))


def _arrived_and_planned(cluster: Cluster, world: World) -> None:
    """Rows arrive at an idle query, which plans its next batch and acknowledges the last one."""
    _append(cluster, world)
    _planned(cluster, world)


def _committed(cluster: Cluster, world: World) -> None:
    """The query plans, acknowledges and commits its next batch."""
    _planned(cluster, world)
    write_checkpoint(world.checkpoint, QUEUE, {max(BATCHES) + 1: {0: ROWS - 1, 1: ROWS - 1}}, max(BATCHES) + 1,
                     consumer=CONSUMER)


def _decommissioned(cluster: Cluster, world: World) -> None:
    """The other job goes away: its consumer unregistered and removed."""
    cluster.unregister_queue_consumer(QUEUE, OTHER)
    cluster.remove(OTHER)


def _other_read(cluster: Cluster, world: World) -> None:
    """Rows arrive and the other job reads them at once (its vital consumer moves on)."""
    _append(cluster, world)
    ends = {t.tablet_index: t.total_row_count for t in cluster.get_tablet_infos(QUEUE)}
    advance_consumer(cluster, OTHER, QUEUE, ends)


def _retuned(cluster: Cluster, world: World) -> None:
    """A person sets the query's cap (`opsd tuning set`)."""
    write_tuning(cluster, default_tuning_path(CONSUMER), max_rows_per_partition=7, reason="set by a person")


#: The changes swept (each ~0.5 s: a registration is swept by its removal with its consumer, a batch planned by one
#: planned as rows arrive at an idle query, rows appended by rows another job reads at once).
CHANGES = (Change("trim", _trim), Change("reshard", _reshard), Change("batch_committed", _committed, running=True),
           Change("rows_arrived_and_batch_planned", _arrived_and_planned, running=True, rows=BATCHES[max(BATCHES)] + 1),
           Change("other_job_decommissioned", _decommissioned),
           Change("rows_arrived_and_read_by_another_job", _other_read), Change("tuning_rewritten", _retuned))


@dataclass(frozen=True)
class Outcome:
    """What one cycle found and did: each step's outcome, the failures logged, what each check found (`found`) and
    the cluster calls it made, by name."""

    steps: tuple[tuple[str, StepOutcome], ...]
    failures: tuple[str, ...]
    found: tuple[Any, ...]
    calls: tuple[str, ...] = field(compare=False, default=())
    results: tuple[Any, ...] = field(compare=False, default=())

    @property
    def failed(self) -> bool:
        return bool(self.failures) or any(o is not StepOutcome.OK for _, o in self.steps)


def run_cycle(monkeypatch: pytest.MonkeyPatch, world: World, change: Change, before: int | None) -> Outcome:
    """One cycle of the registry's checks on `world`, with `change` made before its `before`th cluster call (None:
    never; 0: before the cycle)."""
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore(), clock=lambda: 1_000_000.0)
    recorder.status.update(QUERY, partitions=LAST_BATCH)
    if not change.running:
        recorder.status.update(QUERY, started_at=999_000.0, active=False)
    checks = build_checks(recorder, ChecksSettings(), config=world.config(), memory=SparkMemory(NoStages(), {}),
                          clock=lambda: 1_000_000.0)

    def make() -> None:
        with _connect(world.uri) as cluster:
            change.make(cluster, world)

    if before == 0:
        make()
    calls = Calls(make, before)
    with monkeypatch.context() as patched, capture_logs() as logs:
        interleave(patched, calls)
        trace = checks.cycle.run()
        checks.cycle.close()
    return Outcome(tuple((s.step, s.outcome) for s in trace.steps),
                   tuple(f"{e['event']}: {e.get('error', '')}" for e in logs if e["event"] in FAILED_EVENTS)
                   + ((f"the change failed: {calls.error!r}",) if calls.error else ()),
                   found(recorder.status.get(QUERY)), tuple(calls.names), tuple(calls.results))


def found(status: Any) -> tuple[Any, ...]:
    """What the cycle found and did, check by check (desync, the heal, vital consumers, trim forecast, tuner, lag, the
    OOM check's planned batch bytes): each
    one is what the world before or after the change shows (the heal, which reads the world again, may act on the
    world after the change where the desync state was the world's before)."""
    entries = sorted((status.desync or {}).items())
    desync = tuple((q, tuple((p.facts.partition, p.state.value) for p in e.desync.partitions) if e.desync else None)
                   for q, e in entries)
    heals = tuple((q, (e.last_heal.outcome.value, dict(e.last_heal.moves)) if e.last_heal else None)
                  for q, e in entries)
    vital = tuple((a.consumer, a.stalled, a.waiting_rows) for a in status.vital_consumers or ())
    trim = {q: (t.problem, tuple((p.partition, p.outlook.value, p.at_risk) for p in t.partitions))
            for q, t in (status.trim or {}).items()}
    tuned = tuple(sorted((k, d.decision.recommended, d.applied) for k, d in (status.autotune or {}).items()))
    lag = tuple((p.partition, p.lag_seconds is not None) for p in status.lag.partitions) if status.lag else None
    oom = status.oom.batch_bytes if status.oom else None
    return desync, heals, vital, tuple(sorted(trim.items())), tuned, lag, oom


@dataclass(frozen=True)
class Sweep:
    """The cycle on the unchanged world, on the changed one, and with the change before each of its calls."""

    before: Outcome
    after: Outcome
    interleaved: tuple[Outcome, ...]

    def inconsistent(self) -> Iterator[tuple[int, Outcome]]:
        """The runs (by the call the change came before) that failed or where a check found what neither world
        shows (each check's results are one world's: a check that read before the change and one that read after it
        may differ)."""
        for n, outcome in enumerate(self.interleaved, start=1):
            worlds = zip(outcome.found, self.before.found, self.after.found, strict=True)
            mixed = any(found not in (before, after) for found, before, after in worlds)
            if outcome.failed or mixed:
                yield n, outcome


def sweep(monkeypatch: pytest.MonkeyPatch, template: World, change: Change, scratch: Path) -> Sweep:
    """Run the cycle on copies of `template`: unchanged, changed, and with the change before each of its calls."""
    copies = iter(range(10_000))

    def fresh() -> World:
        return template.copy(scratch / f"w{next(copies)}")

    before = run_cycle(monkeypatch, fresh(), change, None)
    after = run_cycle(monkeypatch, fresh(), change, 0)
    runs: list[Outcome] = []
    while len(runs) < len(before.calls):
        run = run_cycle(monkeypatch, fresh(), change, len(runs) + 1)
        runs.append(run)
        while len(runs) < len(before.calls) and unseen(run, before, len(runs) - 1):
            runs.append(run)
    return Sweep(before, after, tuple(runs))


def unseen(run: Outcome, clean: Outcome, index: int) -> bool:
    """Whether the call at `index` of `run` (made after the change) only read and answered as on the unchanged world:
    then the run with the change made after that call is this run again (the code is deterministic), not run anew."""
    return (index < min(len(run.calls), len(clean.calls)) and run.calls[index] == clean.calls[index]
            and run.calls[index] in PLAIN_READS and run.results[index] == clean.results[index])

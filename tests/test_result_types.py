"""One type per fact: what crosses between the checks, the status store and the doctor is typed all the way down
(no `Mapping[str, Any]`, no bare `Any`), and the mappings inside frozen results cannot change under a reader."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import pkgutil
import typing
from collections.abc import Iterator, Mapping, MutableMapping

import pytest

import opsd.checks
import opsd.checks.registry
import opsd.results
from opsd.checks.registry import STEPS
from opsd.observe.phases import PhaseShares
from opsd.observe.progress import BatchSummary, PartitionOffsets
from opsd.observe.status import QueryStatus, jsonable, status_of
from opsd.results.autotune import Decision, Knob, TunerDecision, TuneReason, TunerMode
from opsd.results.desync import DesyncEntry, DesyncState, Heal, HealOutcome, PartitionDesync, QueueDesync
from opsd.results.history import HistoryEntry, HistoryKind, HistoryOutcome
from opsd.results.lag import PartitionLag, QueryLag
from opsd.results.oom import MeasuredBy, OomVerdict, PoolVerdict
from opsd.results.positions import PartitionPositions, QueuePositions
from opsd.results.producers import LastBatch, ProducerCounts, ProducerReport, ProducerState, Session
from opsd.results.queue_agent import Disposition, PartitionSignals, QueueSignals
from opsd.results.trim import PartitionTrim, QueueTrim, TrimOutlook, TrimRule
from opsd.results.vital import VitalConsumerAudit
from streaming_core.auto_trim import AutoTrimConfig
from streaming_core.producer_fences import Fence
from streaming_core.write_stats import WriteStats

#: Names the checks import for type checkers only (their modules do I/O their pure steps must not import).
TYPE_CHECKING_ONLY = {"WriteStats": WriteStats}


def registry_checks() -> list[type]:
    """The check classes the registry builds (every class it names with a `name` and a `run`): a check added to the
    registry is walked without a list here to update."""
    return [v for v in vars(opsd.checks.registry).values()
            if isinstance(v, type) and isinstance(getattr(v, "name", None), str) and callable(getattr(v, "run", None))]


def returned(check: type) -> Iterator[object]:
    """What a check's `run` and `evaluate` return, as their annotations say (the results it hands on)."""
    module = vars(importlib.import_module(check.__module__))
    for method in ("run", "evaluate"):
        if hasattr(check, method):
            yield typing.get_type_hints(getattr(check, method), {**module, **TYPE_CHECKING_ONLY})["return"]


def result_types() -> Iterator[object]:
    """`QueryStatus`, what every check of the registry returns, every result type, and every frozen type of every
    check (its facts, evaluation, decision)."""
    yield QueryStatus
    for check in registry_checks():
        yield from returned(check)
    modules = [importlib.import_module(m.name) for package in (opsd.results, opsd.checks)
               for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module.__name__:
                yield value


def loose_parts(root: object) -> list[str]:
    """Where the types reachable from `root`'s fields hold `Any` (as a mapping's values or bare)."""
    found: list[str] = []
    seen: set[type] = set()

    def walk(hint: object, where: str) -> None:
        if hint is typing.Any:
            found.append(f"{where}: Any")
            return
        args = typing.get_args(hint)
        if typing.get_origin(hint) in (dict, Mapping, MutableMapping) and len(args) == 2 and args[1] is typing.Any:
            found.append(f"{where}: {hint}")
            return
        for arg in args:
            walk(arg, where)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint) and hint not in seen:
            seen.add(hint)
            hints = typing.get_type_hints(hint, localns=TYPE_CHECKING_ONLY)
            for f in dataclasses.fields(hint):
                walk(hints[f.name], f"{hint.__module__}.{hint.__qualname__}.{f.name}")

    walk(root, getattr(root, "__qualname__", str(root)))
    return found


def _named(hint: object) -> str:
    return f"{hint.__module__}.{hint.__qualname__}" if isinstance(hint, type) else str(hint)


@pytest.mark.parametrize("root", sorted(set(result_types()), key=_named), ids=_named)
def test_no_result_holds_a_loose_mapping_or_any(root: object) -> None:
    assert loose_parts(root) == []


def test_the_walk_reaches_every_check_the_registry_builds() -> None:
    names = {c.name for c in registry_checks()}
    assert set(STEPS) | {"watchdog", "tuning", "phases"} <= names
    assert all(list(returned(c)) for c in registry_checks())


@dataclasses.dataclass(frozen=True)
class _Inner:
    values: dict[str, typing.Any]


@dataclasses.dataclass(frozen=True)
class _Outer:
    inner: tuple[_Inner, ...] | None


def test_the_walk_finds_a_loose_mapping_nested_in_a_result() -> None:
    assert [p.split(": ")[0].rsplit(".", 1)[-1] for p in loose_parts(_Outer)] == ["values"]


def test_the_mappings_inside_frozen_results_are_read_only() -> None:
    shared = {"addBatch": 1.0}
    batch = BatchSummary(1, durations_seconds=shared)
    decision = Decision("q", Knob.MAX_ROWS, 1, 2, TuneReason.FAST_BATCHES, {"phases_seconds": shared, "bounds": [1]})
    entry = HistoryEntry("q", 1.0, HistoryKind.HEAL, "//q", HealOutcome.HEALED, HealOutcome.HEALED, {"0": 1}, None,
                         {"states": {"0": "stuck"}})
    status = QueryStatus("q", autotune={Knob.MAX_ROWS: None}, desync={}, last_progress=batch)
    shared["addBatch"] = 2.0  # the caller's dict changes later: the results keep what they were given

    frozen = [batch.durations_seconds, decision.inputs, decision.inputs["phases_seconds"], entry.before,
              entry.inputs["states"], Heal(HealOutcome.HEALED, 1.0, {0: (1, 2)}).moves,
              VitalConsumerAudit("//q", "//c", 0, 0.0, None, {0: 1}).offsets, status.autotune, status.desync]
    for mapping in frozen:
        with pytest.raises(TypeError):
            mapping["x"] = 1  # type: ignore[index]
    assert batch.durations_seconds["addBatch"] == 1.0 and decision.inputs["bounds"] == (1,)
    assert HistoryEntry.outcome_of("applied") is HistoryOutcome.APPLIED


def every_fact() -> QueryStatus:
    """A status with every field set, each result with its partitions, pools and enums (and an infinite time to
    drain: rows arrive faster than they are read)."""
    kept = PartitionPositions(0, 10, None, None, 8, 12, 2)
    added = PartitionPositions(1, 0, None, None, 0, 4, 0, added=True)
    positions = QueuePositions("q", "//q", "//c", "cp", 1, 2, (kept, added), removed_partitions=(2,), vital=True)
    return QueryStatus(
        "q", id="id", run_id="run", active=True, started_at=1.0, terminated_at=2.0, last_batch_id=3,
        last_progress_at=3.0, last_heartbeat_at=4.0, last_progress=BatchSummary(3, 10, 5, 1.5, {"addBatch": 1.0}, 2.0),
        recent_batches=(BatchSummary(2), BatchSummary(3, 10)), backlog_rows=5,
        partitions=(PartitionOffsets("//q", 0, 1, 2, 3),), exception="x", exception_class="E", error="e",
        permanent_failure="p", restarts=2, crash_loop=True, stalled=True, trigger_interval_seconds=5.0,
        max_rows_per_partition=100, max_bytes_per_partition=1000, dyn_batch_size=50,
        desync={"//q": DesyncEntry(QueueDesync(positions, (PartitionDesync(kept, DesyncState.STUCK),
                                                           PartitionDesync(added, DesyncState.IN_SYNC))),
                                   Heal(HealOutcome.HEALED, 1.0, {0: (1, 2)})),
                "//r": DesyncEntry(None, Heal(HealOutcome.CONFLICT, 2.0))},
        lag=QueryLag("q", (PartitionLag("//q", 0, 5, 1.5), PartitionLag("//q", 1, 0, None)), 3.0, 1.0),
        queue_agent={"//q": QueueSignals("q", "//q", "//c", True, 1.0, (
            PartitionSignals(0, 1.0, 5, Disposition.PENDING_CONSUMPTION, 2.0),))},
        autotune={Knob.MAX_ROWS: TunerDecision(Decision("q", Knob.MAX_ROWS, 100, 200, TuneReason.FAST_BATCHES),
                                               TunerMode.APPLY, True, (10, 1000), at=5.0)},
        oom=OomVerdict(0.5, 0.95, 0.01, 1e6, 100, (PoolVerdict("heap", 0.5, 1e6, (9e5, 1.1e6), 0.01, 2e6, 1e5, None,
                                                               4, MeasuredBy.SPARK_METRICS),), 2000),
        trim={"//q": QueueTrim("q", "//q", "//c", AutoTrimConfig(True, 5), (
            PartitionTrim("//q", 0, TrimOutlook.APPROACHING, 60.0, 5, TrimRule.RETAINED_ROWS, 1.0, 0.5, True),))},
        vital_consumers=(VitalConsumerAudit("//q", "//v", 5, 10.0, 1.0, {0: 3}, stalled=True),),
        phases=PhaseShares("run", 2, 3, 4.0, {"decode": 3.0}, {"decode": 0.75}, "decode", 0.9, "decode binds"),
        producers=ProducerReport(
            "q", "//p", "//out", "batch", 6.0, ProducerState.ZOMBIE_FENCED, (Session("s-p0", 2, 7, 3, 0, 1),), 2,
            LastBatch(3, 1, 1, 4, 5.0), (Fence("s-p0", 1, 3, 0, 0, 5.5),), ("s-p1",), 3, ProducerCounts(1, 4, 1)))


def test_a_status_read_back_from_its_status_json_is_the_status_it_was_written_from() -> None:
    status = every_fact()
    document = json.loads(json.dumps(jsonable(status)))

    read = status_of("q", document)

    assert read == status
    assert jsonable(read) == document
    assert read.lag.time_to_drain_seconds == math.inf and read.desync["//q"].desync.state is DesyncState.STUCK
    assert read.trim["//q"].partitions[0].binding is TrimRule.RETAINED_ROWS
    assert read.oom.pools[0].measured_by is MeasuredBy.SPARK_METRICS
    assert read.producers.state is ProducerState.ZOMBIE_FENCED and read.producers.last_fence.batch_id == 3


@pytest.mark.hostile
@pytest.mark.parametrize(("field", "value"), [("desync", {"//q": {"consumer": "//c", "source": "cp", "partitions": {
    "0": {"state": "melted", "checkpoint_next": 1, "consumer_offset": 1, "row_count": 1, "trimmed_row_count": 0}}}}),
    ("restarts", "many"), ("oom", {"risk": [1]}), ("autotune", {"no_such_knob": {}})])
def test_a_status_document_this_version_cannot_read_is_refused_where_it_comes_in(field: str, value: object) -> None:
    document = {**jsonable(QueryStatus("q")), field: value, "a_newer_field": 1}
    assert status_of("q", {"a_newer_field": 1}) == QueryStatus("q")
    with pytest.raises((TypeError, ValueError, KeyError)):
        status_of("q", document)

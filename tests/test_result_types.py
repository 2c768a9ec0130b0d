"""One type per fact: what crosses between the checks, the status store and the doctor is typed all the way down
(no `Mapping[str, Any]`, no bare `Any`), and the mappings inside frozen results cannot change under a reader."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing
from collections.abc import Iterator, Mapping, MutableMapping

import pytest

import opsd.checks
import opsd.observe.results
from opsd.checks.producers.facts import ProducerReport
from opsd.observe.progress import BatchSummary
from opsd.observe.results import (
    Decision,
    Heal,
    HealOutcome,
    HistoryEntry,
    HistoryKind,
    HistoryOutcome,
    Knob,
    TuneReason,
    VitalConsumerAudit,
)
from opsd.observe.status import QueryStatus
from streaming_core.write_stats import WriteStats

#: Names imported for type checkers only: by the checks (their modules do I/O their pure steps must not import), and
#: by the status store (a check's own result type, from a room above it).
TYPE_CHECKING_ONLY = {"WriteStats": WriteStats, "ProducerReport": ProducerReport}


def result_types() -> Iterator[type]:
    """`QueryStatus`, every result type, and every frozen type of every check (its facts, evaluation, decision)."""
    yield QueryStatus
    modules = [opsd.observe.results] + [importlib.import_module(m.name) for m in
                                        pkgutil.walk_packages(opsd.checks.__path__, "opsd.checks.")]
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module.__name__:
                yield value


def loose_parts(root: type) -> list[str]:
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

    walk(root, root.__qualname__)
    return found


@pytest.mark.parametrize("root", sorted(set(result_types()), key=lambda t: f"{t.__module__}.{t.__qualname__}"),
                         ids=lambda t: f"{t.__module__}.{t.__qualname__}")
def test_no_result_holds_a_loose_mapping_or_any(root: type) -> None:
    assert loose_parts(root) == []


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
    entry = HistoryEntry("q", 1.0, HistoryKind.HEAL, "//q", HealOutcome.HEALED, "healed", {"0": 1}, None,
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

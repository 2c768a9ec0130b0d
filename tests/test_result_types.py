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
import opsd.checks.registry
import opsd.results
from opsd.checks.registry import STEPS
from opsd.observe.progress import BatchSummary
from opsd.observe.status import QueryStatus
from opsd.results.autotune import Decision, Knob, TuneReason
from opsd.results.desync import Heal, HealOutcome
from opsd.results.history import HistoryEntry, HistoryKind, HistoryOutcome
from opsd.results.vital import VitalConsumerAudit
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

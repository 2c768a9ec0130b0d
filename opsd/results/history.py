"""A decision as the decision history keeps it (`opsd.stores.history`): who decided, about what, its outcome and
why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from opsd.results.autotune import ReplanRefusal, TuneReason
from opsd.results.desync import HealOutcome
from opsd.results.values import JsonValue, frozen_json


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


#: Why a decision was made: a tuner's `TuneReason` (a replan's `MEMORY_FAILURE`), a heal's `HealOutcome`, or why a
#: replan was refused (`ReplanRefusal`).
HistoryReason = TuneReason | HealOutcome | ReplanRefusal
#: The reasons' enums, whose values are distinct (a row's reason is read back by its value alone).
REASONS: tuple[type[TuneReason] | type[HealOutcome] | type[ReplanRefusal], ...] = (TuneReason, HealOutcome,
                                                                                  ReplanRefusal)


@dataclass(frozen=True)
class HistoryEntry:
    """One decision as the history table keeps it (`opsd.stores.history`): what was decided about (`subject`: the
    knob, the queue, the batch), its outcome (a `HistoryOutcome`, or a heal's `HealOutcome`), why (a
    `HistoryReason`), the values before and after, what it was decided from,
    and when (unix seconds, the deciding check's clock). `before`, `after` and `inputs` hold JSON values: they leave
    the process as JSON text in the table's rows."""

    query: str
    at: float
    kind: HistoryKind
    subject: str
    outcome: HistoryOutcome | HealOutcome
    reason: HistoryReason
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

    @staticmethod
    def reason_of(value: str) -> HistoryReason:
        """A reason read back from a history row; `ValueError` when it is none of them."""
        for kind in REASONS:
            if value in kind._value2member_map_:
                return kind(value)
        raise ValueError(f"not a decision's reason: {value!r}")

    def to_json(self) -> Mapping[str, Any]:
        return {"query": self.query, "at": self.at, "kind": self.kind, "subject": self.subject,
                "outcome": self.outcome, "reason": self.reason, "before": self.before, "after": self.after,
                "inputs": self.inputs}

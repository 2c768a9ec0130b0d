"""A cycle's trace (`opsd.checks.cycle`): when it ran, the reading it took and how each step ended."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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

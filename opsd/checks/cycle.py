"""The cycle of the position checks: where every query stands is read once, then each check due evaluates that one
reading in a declared order, so checks that feed each other see the same world, in an order that does not depend on
timing (`opsd.checks.registry` declares it: lag -> Queue Agent signals -> trim forecast and vital consumers -> desync
and heal -> OOM risk -> auto-tuner; a later step reads an earlier one's result from the status store, where the
recorder put it).

One schedule runs the cycle, at the shortest interval of its steps; a step runs when its own interval has passed
since its last run. Each step runs on a thread of its own: a step that outruns the cycle's interval is counted
(`slow`) and left to finish there while the cycle goes on with the next step; a step whose previous run still runs is
not started again (`still_running`); a step that raises is counted and logged (`cycle_step_failed`). None of them
holds up the others' next cycle. The cycle's duration, each step's time and outcome are recorded (metrics and the
trace on `/status`), and the series of queries, queues and partitions the reading no longer has are removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as StepTimeout
from dataclasses import dataclass
from typing import Protocol

import structlog

from opsd.collect.positions import PositionsCollector, Reading
from opsd.observe.recorder import Recorder
from opsd.results.cycle import CycleTrace, StepOutcome, StepTrace

log = structlog.get_logger(__name__)

#: The name of the reading in a cycle's trace (its first entry).
READING = "positions"
#: The share of a step's interval a schedule's jitter may cut off it: a step whose interval has all but passed runs.
JITTER_SHARE = 0.01


class PositionCheck(Protocol):
    """A check that evaluates a positions reading (collect from it, evaluate, decide, record, apply)."""

    name: str

    def evaluate(self, reading: Reading) -> object:
        ...


@dataclass(frozen=True)
class Step:
    """A check of the cycle and how often it runs."""

    check: PositionCheck
    interval_seconds: float


class Cycle:
    """The position checks as one cycle (scheduled as the check `cycle`)."""

    name = "cycle"

    def __init__(self, recorder: Recorder, positions: PositionsCollector, steps: Sequence[Step], *,
                 clock: Callable[[], float] = time.time, timer: Callable[[], float] = time.perf_counter) -> None:
        self.recorder = recorder
        self.positions = positions
        self.steps = tuple(steps)
        self.clock = clock
        self.timer = timer
        self.interval_seconds = min((s.interval_seconds for s in self.steps), default=0.0)
        self._threads = {s.check.name: ThreadPoolExecutor(1, thread_name_prefix=f"opsd-{s.check.name}")
                         for s in self.steps}
        self._running: dict[str, Future[object]] = {}
        self._last_run: dict[str, float] = {}
        recorder.record_cycle_steps([s.check.name for s in self.steps])

    def named(self, name: str) -> PositionCheck | None:
        return next((s.check for s in self.steps if s.check.name == name), None)

    def run(self) -> CycleTrace:
        """Read the positions once, then run each step due on that reading; returns the cycle's trace."""
        started, began = self.clock(), self.timer()
        reading = self.positions.read()
        traces = [StepTrace(READING, started, self.clock(), reading.at, StepOutcome.OK)]
        step_seconds: dict[str, float] = {}
        for step in self.steps:
            if not self._due(step, started):
                continue
            trace, seconds = self._run_step(step, reading)
            traces.append(trace)
            if seconds is not None:
                step_seconds[step.check.name] = seconds
        self.recorder.forget_absent(reading.queries)
        trace = CycleTrace(started, self.clock(), reading.at, tuple(traces))
        self.recorder.record_cycle(trace, self.timer() - began, step_seconds)
        return trace

    def close(self) -> None:
        """Let the steps' threads end once their runs do (never waits)."""
        for thread in self._threads.values():
            thread.shutdown(wait=False)

    def _due(self, step: Step, now: float) -> bool:
        last = self._last_run.get(step.check.name)
        return last is None or now - last >= step.interval_seconds * (1 - JITTER_SHARE)

    def _run_step(self, step: Step, reading: Reading) -> tuple[StepTrace, float | None]:
        """The step's trace and its own time (None: it did not finish within the cycle's interval, or did not run)."""
        name, started = step.check.name, self.clock()
        previous = self._running.get(name)
        if previous is not None and not previous.done():
            return StepTrace(name, started, started, reading.at, StepOutcome.STILL_RUNNING), None
        self._last_run[name] = started
        began = self.timer()
        running = self._threads[name].submit(step.check.evaluate, reading)
        self._running[name] = running
        try:
            running.result(timeout=self.interval_seconds)
        except StepTimeout:
            return StepTrace(name, started, self.clock(), reading.at, StepOutcome.SLOW), None
        except Exception:
            log.exception("cycle_step_failed", step=name)
            return StepTrace(name, started, self.clock(), reading.at, StepOutcome.FAILED), self.timer() - began
        return StepTrace(name, started, self.clock(), reading.at, StepOutcome.OK), self.timer() - began

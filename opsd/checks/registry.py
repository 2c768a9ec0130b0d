"""Every check, built and scheduled in one place: `opsd run` (`opsd.runtime.lifecycle`), `opsd.attach`
(`opsd.runtime.monitor`) and `opsd doctor` take their checks from here.

A check is an object with a `name` (its label in `opsd_check_*` metrics and `check_failed` logs) and a zero-argument
`run()`, built from the recorder (the only writer of metrics and status) and what it reads. The checks that read
where queries stand are the steps of one `Cycle` (`opsd.checks.cycle`), in the order `STEPS` declares: each
checkpoint, consumer and queue is read once per cycle, and every step of the cycle evaluates that reading.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from opsd.checks.autotune.check import AutotuneCheck
from opsd.checks.autotune.check import targets_for as autotune_targets
from opsd.checks.cycle import Cycle, PositionCheck, Step
from opsd.checks.desync.check import DesyncCheck
from opsd.checks.health.check import Watchdog
from opsd.checks.lag.check import LagCheck
from opsd.checks.oom.check import OomCheck
from opsd.checks.oom.collect import SparkRest
from opsd.checks.oom.sampler import MemorySampler
from opsd.checks.phases.check import PhasesCheck
from opsd.checks.producers.check import ProducersCheck
from opsd.checks.producers.collect import targets_for as producers_targets
from opsd.checks.queue_agent.check import QueueAgentCheck
from opsd.checks.scheduler import CheckScheduler
from opsd.checks.trim.check import TrimCheck
from opsd.checks.tuning.check import TuningCheck
from opsd.checks.vital.check import VitalConsumerCheck
from opsd.collect.positions import PositionsCollector, ProgressSource, QueryTarget, targets_for
from opsd.config.models import ChecksSettings, OpsdConfig
from opsd.observe.readiness import ProgressPolicy
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.stores.history.apply import HistoryLog
from opsd.stores.history.table import history_paths

#: Called by the runner before it (re)starts a pipeline, with its name and the text of the failure that ended its last
#: run (None at the first start).
BeforeStart = Callable[[str, str | None], object]
#: The steps of the cycle, in their order: lag first (the Queue Agent signals and the trim forecast read its rates),
#: then the queues' trimming and vital consumers, then desync and its heal, then OOM risk (from the batches and the
#: reading), then the auto-tuner (which reads this cycle's OOM verdict).
STEPS = ("lag", "queue_agent", "trim", "vital_consumers", "desync", "oom", "autotune")


class Check(Protocol):
    """One periodic check."""

    name: str

    def run(self) -> object:
        """Collect, evaluate and record (and, for a check that acts, decide and apply); returns what it found."""
        ...


@dataclass(frozen=True)
class SparkMemory:
    """What the OOM check measures a session's memory by: the Spark UI's REST API, the conf in force and, in local
    mode, the running memory sampler."""

    rest: SparkRest
    conf: Mapping[str, str]
    sampler: MemorySampler | None = None


@dataclass(frozen=True)
class Scheduled:
    check: Check
    interval_seconds: float


@dataclass
class Checks:
    """The checks of one monitor: the cycle of the position checks (scheduled among the others), their shared
    positions and the runner's hooks (the OOM check's verdict first, then the tuner that reads it)."""

    positions: PositionsCollector
    cycle: Cycle
    scheduled: list[Scheduled] = field(default_factory=list)
    before_start: list[BeforeStart] = field(default_factory=list)
    #: Checks run once when scheduled, so their values are known from the start, not after one interval.
    run_at_start: tuple[str, ...] = ()

    def schedule(self, scheduler: CheckScheduler) -> None:
        for s in self.scheduled:
            if s.check.name in self.run_at_start:
                scheduler.run_check(s.check.name, s.check.run)
            scheduler.add_check(s.check.name, s.check.run, s.interval_seconds)

    def named(self, name: str) -> Check | PositionCheck | None:
        """A scheduled check or a step of the cycle."""
        return next((s.check for s in self.scheduled if s.check.name == name), None) or self.cycle.named(name)


def stopped_in(status: StatusStore) -> Callable[[str], bool]:
    """Whether a query was started and does not run now, as the status store knows it."""
    def stopped(query: str) -> bool:
        found = status.get(query)
        return found is not None and found.started_at is not None and not found.active
    return stopped


@dataclass(frozen=True)
class Diagnosis:
    """The checks `opsd doctor` runs once (`opsd.doctor.gather`): the positions of its targets, never healed, the
    cycle's steps that need no running session, in their order, and the tuning values in force (with a config)."""

    positions: PositionsCollector
    steps: tuple[PositionCheck, ...]
    tuning: TuningCheck | None = None
    producers: ProducersCheck | None = None

    def run(self) -> None:
        """The values in force and the producers' sessions, then one reading and each step's collect, evaluate and
        decide on it, into the recorder's status store."""
        for check in (self.tuning, self.producers):
            if check is not None:
                check.run()
        reading = self.positions.read()
        for step in self.steps:
            step.evaluate(reading)


def build_diagnosis(recorder: Recorder, cluster_uri: str | None, targets: Iterable[QueryTarget], *,
                    config: OpsdConfig | None = None, clock: Callable[[], float] = time.time) -> Diagnosis:
    """The checks of a one-shot diagnosis of `targets` (and, with a config, its tuning values, its producers' sessions
    and the auto-tuner's recommendations), as the daemon builds them but in their evaluate and decide steps only: no
    heal (targets are read with `heal` off), no tuning document written (the tuner recommends), no decision history
    kept. Offline there is one sample: rates, trends and how long something stood still are unknown."""
    positions = PositionsCollector(cluster_uri, [replace(t, heal=False) for t in targets], clock=clock)
    settings = config.checks if config else ChecksSettings()
    steps: list[PositionCheck] = [DesyncCheck(recorder, positions), LagCheck(recorder, positions, settings),
                                  QueueAgentCheck(recorder, positions), TrimCheck(recorder, positions, settings),
                                  VitalConsumerCheck(recorder, positions)]
    if config is not None:
        steps.append(AutotuneCheck(recorder, positions, autotune_targets(config), applies=False))
    return Diagnosis(positions, tuple(sorted(steps, key=lambda s: STEPS.index(s.name))),
                     TuningCheck(recorder, config, cluster_uri) if config else None,
                     ProducersCheck(recorder, config, clock=clock) if config and producers_targets(config) else None)


def build_checks(recorder: Recorder, settings: ChecksSettings, *, config: OpsdConfig | None = None,
                 cluster_uri: str | None = None, progress: ProgressSource | None = None,
                 memory: SparkMemory | None = None, policy: ProgressPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> Checks:
    """The checks of a monitor: the watchdog (judging by `policy`, default the settings'), desync, lag, the trim
    forecast and the vital-consumer audit of the config's queries and of the running queries found from `progress`;
    with a config also the tuning values in force, the batch phases, the producers of pipelines in producer mode, the
    auto-tuner and, with `memory`, the OOM risk. `config.cluster` is
    the cluster unless `cluster_uri` names one."""
    uri = cluster_uri or (config.cluster if config else None)
    positions = PositionsCollector(uri, targets_for(config) if config else (), progress,
                                   stopped=stopped_in(recorder.status), clock=clock)
    history = HistoryLog(history_paths(config), recorder, settings.history_rows_per_query) if config else None
    steps = [Step(DesyncCheck(recorder, positions, history), settings.desync_seconds),
             Step(LagCheck(recorder, positions, settings), settings.lag_seconds),
             Step(QueueAgentCheck(recorder, positions), settings.lag_seconds),
             Step(TrimCheck(recorder, positions, settings), settings.retention_seconds),
             Step(VitalConsumerCheck(recorder, positions), settings.retention_seconds)]
    scheduled = [Scheduled(Watchdog(recorder, policy or settings.progress_policy(), clock=clock),
                           settings.watchdog_seconds)]
    before_start: list[BeforeStart] = []
    if config is not None:
        scheduled.append(Scheduled(TuningCheck(recorder, config), settings.tuning_seconds))
        scheduled.append(Scheduled(PhasesCheck(recorder, config), settings.phases_seconds))
        if producers_targets(config):
            scheduled.append(Scheduled(ProducersCheck(recorder, config, clock=clock), settings.producers_seconds))
        if memory is not None:
            oom = OomCheck(recorder, positions, config, memory.rest, memory.conf, memory.sampler)
            steps.append(Step(oom, settings.oom_risk_seconds))
            before_start.append(oom.before_start)
        tuner = AutotuneCheck(recorder, positions, autotune_targets(config), history)
        steps.append(Step(tuner, settings.autotune_seconds))
        before_start.append(tuner.before_start)
    cycle = Cycle(recorder, positions, sorted(steps, key=lambda s: STEPS.index(s.check.name)), clock=clock)
    scheduled.append(Scheduled(cycle, cycle.interval_seconds))
    return Checks(positions, cycle, scheduled, before_start,
                  run_at_start=(TuningCheck.name,) if config is not None else ())

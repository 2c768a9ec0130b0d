"""The scheduled auto-tuner: for every query whose mode is not `off`, collect -> evaluate -> decide -> record, and
in mode `apply` apply. It also runs for one pipeline just before the runner (re)starts it (`before_start`), so a
query starts with a cap its first batch survives and restarts after an out-of-memory failure with the cut cap
(the source reads its tuning document at every `latestOffset`); there, and only there (the query is stopped), the
batch the failed run left planned is planned again under that cap when that is safe (`decide_replan`).

One query's failure is logged and never stops the others.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable

import structlog

from opsd.checks.autotune.apply import apply, replan
from opsd.checks.autotune.collect import AutotuneTarget, collect, replan_policy
from opsd.checks.autotune.decide import (
    Replan,
    TunerMemory,
    decide,
    decide_replan,
    remember,
)
from opsd.checks.autotune.evaluate import Evaluation, evaluate
from opsd.checks.tuning.collect import TuningSources, sources_for
from opsd.collect.positions import PositionsCollector, Reading
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.results.autotune import Decision, Direction, Knob, TunerDecision, TunerMode
from opsd.results.positions import QueryPositions
from opsd.stores.history.apply import HistoryLog
from opsd.stores.history.decide import replan_entries, tuner_entries
from streaming_core.cluster import Cluster, ClusterError, connect
from streaming_core.tuning import default_tuning_path

log = structlog.get_logger(__name__)


def targets_for(config: OpsdConfig) -> list[AutotuneTarget]:
    """The config's pipelines (mode `apply` unless configured) and watched queries (`recommend`), except `off`."""
    conf = dict(config.spark.conf)
    found = [AutotuneTarget(sources_for(p, conf), TunerMode(p.autotune.mode_for(watched=False)), p.autotune,
                            replan_policy(p, config.cluster, conf))
             for p in config.pipelines if p.source.format == "yt" or p.sink.format == "yt"]
    for w in config.watch:
        document = default_tuning_path(w.consumer)
        sources = TuningSources(w.name, document, None, None, None)
        found.append(AutotuneTarget(sources, TunerMode(w.autotune.mode_for(watched=True)), w.autotune))
    return [t for t in found if t.mode is not TunerMode.OFF]


class AutotuneCheck:
    """The auto-tuner of its targets (`opsd.checks.registry` builds it); `before_start` for the runner."""

    name = "autotune"

    def __init__(self, recorder: Recorder, positions: PositionsCollector, targets: Iterable[AutotuneTarget],
                 history: HistoryLog | None = None, *, applies: bool = True) -> None:
        self.recorder = recorder
        #: Whether decisions are applied in mode `apply` (False: recommended only, as `opsd doctor` shows them).
        self.applies = applies
        self.positions = positions
        self.history = history
        self.targets = {t.query: t for t in targets}
        self.memory: dict[str, TunerMemory] = {}
        self._lock = threading.Lock()  # the scheduler's runs and the runner's before_start share the memory

    def run(self) -> list[Decision]:
        """Decide (and apply where the mode says so) for every target; returns the decisions."""
        return self.evaluate(self.positions.read() if self.targets else Reading(0.0))

    def evaluate(self, reading: Reading) -> list[Decision]:
        done: list[Decision] = []
        with contextlib.ExitStack() as stack:
            cluster = stack.enter_context(connect(self.positions.cluster_uri)) if self.targets else None
            for target in self.targets.values():
                done += self._tune(cluster, target, positions=reading.of(target.query))
        return done

    def before_start(self, query: str, failure: str | None = None) -> list[Decision]:
        """Called by the runner before it starts or restarts `query` (`failure`: why the last run ended)."""
        target = self.targets.get(query)
        if target is None:
            return []
        with connect(self.positions.cluster_uri) as cluster:
            return self._tune(cluster, target, failure, stopped=True)

    def _tune(self, cluster: Cluster, target: AutotuneTarget, failure: str | None = None, *, stopped: bool = False,
              positions: QueryPositions | None = None) -> list[Decision]:
        with self._lock:
            try:
                status = self.recorder.status.get(target.query)
                facts = collect(cluster, target, status, failure, stopped=stopped, positions=positions)
                evaluation = evaluate(facts, target.settings)
                memory = self.memory.get(target.query, TunerMemory())
                decisions = decide(evaluation, memory, target.settings)
                applying = self.applies and target.mode is TunerMode.APPLY
                if applying:
                    apply(cluster, target.tuning.source_document, target.tuning.sink_document, decisions)
            except (ClusterError, OSError, ValueError) as e:
                log.warning("autotune_failed", query=target.query, error=f"{type(e).__name__}: {e}")
                return []
            self.memory[target.query] = remember(memory, decisions, evaluation, applied=applying)
        made = [recorded(d, target, applied=applying) for d in decisions]
        for d in made:
            self.recorder.record_autotune(d)
        if self.history is not None:
            self.history.record(cluster, tuner_entries(made, self.recorder.clock()))
        if applying and stopped:
            cap = next((d.recommended for d in decisions if d.knob == Knob.MAX_ROWS), None)
            self._replan(cluster, target, decide_replan(evaluation, cap), evaluation, cap)
        return list(decisions)

    def _replan(self, cluster: Cluster, target: AutotuneTarget, decision: Replan | None, evaluation: Evaluation,
                cap: int | None) -> None:
        """Plan the failed run's batch again (the query is stopped: only `before_start` calls this)."""
        if decision is None or target.replan.checkpoint is None:
            return
        try:
            replan(cluster, target.replan.checkpoint, decision)
        except (ClusterError, OSError, ValueError) as e:
            log.warning("autotune_replan_failed", query=target.query, error=f"{type(e).__name__}: {e}")
            return
        self.recorder.record_replan(target.query, decision.batch_id, decision.refused)
        if self.history is not None:
            planned = evaluation.facts.uncommitted
            rows = planned.partition_rows if planned else None
            self.history.record(cluster, replan_entries(decision.query, decision.batch_id, decision.refused, cap, rows,
                                                        self.recorder.clock()))


def recorded(decision: Decision, target: AutotuneTarget, *, applied: bool) -> TunerDecision:
    """A decision with what the status shows beside it: the mode, whether it was applied, the knob's bounds."""
    return TunerDecision(decision, target.mode, applied and decision.direction != Direction.HOLD,
                         bounds(target, decision.knob))


def bounds(target: AutotuneTarget, knob: Knob) -> tuple[int, int]:
    """A knob's configured lower and upper bound."""
    s = target.settings
    match knob:
        case Knob.DYN_BATCH_SIZE:
            return s.min_dyn_batch_size, s.max_dyn_batch_size
        case Knob.MAX_BYTES:
            return s.min_bytes_per_partition, s.max_bytes_per_partition
        case Knob.MAX_ROWS:
            return s.min_rows_per_partition, s.max_rows_per_partition

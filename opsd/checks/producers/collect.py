"""Collect what the producers check evaluates, per pipeline that writes through a queue producer: the query's sessions
(one read of the producer table), the sink's last write statistics and the fences its refused attempts recorded
(`streaming_core.sink_producer`), and from the status store the query's last completed batch and the previous run's
report."""

from __future__ import annotations

from collections.abc import Mapping

from opsd.checks.producers.facts import ProducerFacts, ProducerTarget
from opsd.config.models import OpsdConfig, PipelineConfig
from opsd.observe.status import StatusStore
from opsd.results.producers import Session
from streaming_core.cluster import Cluster, ClusterError, resolve_uri
from streaming_core.options import (
    CONF_CLUSTER,
    PRODUCER_PATH,
    SEQUENCE_BY_BATCH,
    SinkOptions,
)
from streaming_core.sink_producer import SEQUENCE_STRIDE, StoredSession, read_fences, session_prefix, stored_sessions
from streaming_core.write_stats import read_write_stats


def target_of(pipeline: PipelineConfig, session: Mapping[str, str]) -> ProducerTarget | None:
    """The pipeline's producer target, named as its sink names its sessions (from the options Spark hands it: the
    sink's with the tuning document opsd gives it, the checkpoint location and the query's name, over the session's
    conf); None when it writes no queue through a producer (or its sink options do not parse: preflight says why)."""
    if pipeline.sink.format != "yt" or not pipeline.sink.options.get(PRODUCER_PATH):
        return None
    try:
        options = SinkOptions.parse(pipeline.yt_sink_options(), session)
        prefix = session_prefix(options)
    except ValueError:
        return None
    return ProducerTarget(pipeline.name, options.cluster, options.producer_path or "", options.path, prefix,
                          options.producer_sequence, options.tuning_path)


def targets_for(config: OpsdConfig) -> list[ProducerTarget]:
    session = {**config.spark.conf, CONF_CLUSTER: resolve_uri(config.cluster)}
    return [t for p in config.pipelines if (t := target_of(p, session)) is not None]


def session_of(stored: StoredSession, numbering: str) -> Session:
    """A stored session as the check sees it: in batch numbering the batch its last number stands for; the task that
    pushed last from its `user_meta` (where it holds one)."""
    meta = stored.user_meta if isinstance(stored.user_meta, Mapping) else {}
    number = stored.sequence_number
    return Session(stored.session, stored.epoch, number,
                   number // SEQUENCE_STRIDE if numbering == SEQUENCE_BY_BATCH and number >= 0 else None,
                   _int(meta.get("partition")), _int(meta.get("attempt")))


def collect(cluster: Cluster, target: ProducerTarget, status: StatusStore | None, at: float) -> ProducerFacts:
    found = status.get(target.query) if status is not None else None
    previous, batch = (found.producers, found.last_batch_id) if found else (None, None)
    try:
        stored = stored_sessions(cluster, target.producer, target.queue, target.prefix)
    except ClusterError as e:
        return ProducerFacts(target, at, query_batch_id=batch, previous=previous, problem=str(e))
    return ProducerFacts(target, at, tuple(session_of(s, target.numbering) for s in stored),
                         read_write_stats(cluster, target.tuning_path), read_fences(cluster, target.tuning_path),
                         batch, previous)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

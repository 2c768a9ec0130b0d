"""Hand-made checkpoints in the layout Spark writes (and SPYT, which is Spark): `offsets/N`, `commits/N`.

The files are byte-for-byte what a real query writes (see `test_checkpoint.py`, which compares them with one):
`v1`, a metadata line, then the source's offset JSON — this connector's with `consumer_path`, SPYT's without.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from streaming_core.cluster import Cluster
from tests.support.cluster import make_queue

METADATA = {"batchWatermarkMs": 0, "batchTimestampMs": 1_795_389_897_044,
            "conf": {"spark.sql.shuffle.partitions": "4"}}


def offset_line(queue: str, last_read: Mapping[int, int], consumer: str | None, cluster: str = "local") -> str:
    value = {"cluster": cluster, "path": queue, "partitions": {str(p): v for p, v in sorted(last_read.items())}}
    if consumer is not None:
        value["consumer_path"] = consumer
    return json.dumps(value)


def write_checkpoint(location: Path, queue: str, batches: Mapping[int, Mapping[int, int]], committed: int | None, *,
                     consumer: str | None = None, cluster: str = "local") -> Path:
    """Batches `{batch_id: {partition: last_read}}`, committed up to `committed` (None: nothing committed).
    `consumer=None` writes SPYT's offsets (no `consumer_path`)."""
    (location / "offsets").mkdir(parents=True, exist_ok=True)
    (location / "commits").mkdir(exist_ok=True)
    (location / "metadata").write_text('{"id":"5cad9bb5-dc50-4d2e-bc06-5d4bf965c4f6"}')
    for batch_id, last_read in batches.items():
        (location / "offsets" / str(batch_id)).write_text(
            f"v1\n{json.dumps(METADATA)}\n{offset_line(queue, last_read, consumer, cluster)}")
        if committed is not None and batch_id <= committed:
            (location / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return location


def job_with_checkpoint(cluster: Cluster, yt_root: str, location: Path, batches: Mapping[int, Mapping[int, int]], *,
                        committed: int, rows: int = 40, consumer_at: int | None = None) -> tuple[str, str, str]:
    """A 2-partition queue of `rows` rows, its registered consumer (at `consumer_at` on both partitions, if given)
    and a checkpoint of `batches` in this connector's layout: `(queue, consumer, location)`."""
    queue, consumer = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(cluster, queue, consumer=consumer)
    cluster.insert_rows(queue, [{"data": "x", "n": i} for i in range(rows)])
    write_checkpoint(location, queue, batches, committed, consumer=consumer)
    if consumer_at is not None:
        for p in (0, 1):
            cluster.advance_consumer(consumer, queue, p, None, consumer_at)
    return queue, consumer, str(location)

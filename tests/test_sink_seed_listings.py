"""Seed listings 3, 5 and 6 (SPYT streaming guide, Python) run unchanged but for paths and the session.

The listings start a query without a trigger and wait on it; here a watcher thread stops the query once the
result table holds every input row. Each runs twice: on the embedded cluster, and with the session's cluster
`yt+https://127.0.0.1:PORT?ca_bundle=...` — the YTsaurus backend through the real client over HTTPS, against the
stand-in. Their `yt:///` checkpoints are on the cluster they run on (on YTsaurus in Cypress, here the stand-in's
storage), read back as opsd reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.functions import length

from streaming_core.checkpoint import read_checkpoint
from streaming_core.cluster.base import Cluster
from streaming_core.cluster.embedded import EmbeddedCluster
from streaming_core.options import CONF_CLUSTER
from tests.support.cluster import make_queue
from tests.support.sink import (
    COPY_SCHEMA,
    fill_queue,
    make_table,
    multiset,
    ordered_rows,
    run_listing,
    session_conf,
    stored_chunks,
)
from tests.support.standin import spark_backend

pytestmark = pytest.mark.spark


@pytest.fixture(params=["embedded", "ytsaurus"])
def yt(request: pytest.FixtureRequest, spark: SparkSession, cluster_uri: str) -> Iterator[Cluster]:
    """The cluster the listing runs on; for `ytsaurus` the session's `spark.yt.cluster` names the stand-in."""
    yield from spark_backend(request, spark, cluster_uri)


@pytest.fixture
def storage_root(yt: Cluster, request: pytest.FixtureRequest) -> Path:
    """Where the cluster's rows are stored on disk (the stand-in's storage is an embedded cluster too)."""
    return Path(yt.root) if isinstance(yt, EmbeddedCluster) else request.getfixturevalue("open_standin").root


def row_count(yt: Cluster, path: str, expected: int) -> Callable[[], bool]:
    return lambda: yt.get(f"{path}/@row_count") >= expected


def checkpointed(spark: SparkSession, location: str, queue: str) -> dict[int, int]:
    """The newest batch's end offset of `queue` in the checkpoint at `location`, read from the session's cluster."""
    newest = read_checkpoint(location, spark.conf.get(CONF_CLUSTER)).newest
    assert newest is not None, f"no batch planned in {location}"
    return newest.queue(queue).partitions


def test_listing_3_queue_to_result_with_data_length(spark, yt, yt_root):
    make_queue(yt, f"{yt_root}/queue", consumer=f"{yt_root}/consumer")
    rows = fill_queue(yt, f"{yt_root}/queue", 40)
    make_table(yt, f"{yt_root}/result", [{"name": "data", "type": "string"}, {"name": "data_length", "type": "int32"}])

    def listing_3() -> None:
        df = spark \
            .readStream \
            .format("yt") \
            .option("consumer_path", f"{yt_root}/consumer") \
            .load(f"{yt_root}/queue")
        df\
            .select("data") \
            .withColumn('data_length', length("data")) \
            .writeStream \
            .format("yt") \
            .option("checkpointLocation", f"yt:/{yt_root}/checkpoints") \
            .option("path", f"{yt_root}/result") \
            .start().awaitTermination()

    run_listing(spark, listing_3, row_count(yt, f"{yt_root}/result", len(rows)))
    assert multiset(ordered_rows(yt, f"{yt_root}/result"), "data", "data_length") == multiset(
        [{"data": r["data"], "data_length": len(r["data"])} for r in rows], "data", "data_length")
    assert checkpointed(spark, f"yt:/{yt_root}/checkpoints", f"{yt_root}/queue") == {0: 39, 1: 39}


def test_listing_5_max_rows_per_partition_and_dyn_batch_size(spark, yt, yt_root, storage_root):
    consumer_path, queue_path = f"{yt_root}/consumer", f"{yt_root}/queue"
    checkpoints_path, result_table_path = f"yt:/{yt_root}/checkpoints", f"{yt_root}/result"
    make_queue(yt, queue_path, consumer=consumer_path)
    rows = fill_queue(yt, queue_path, 1500)
    make_table(yt, result_table_path, COPY_SCHEMA)

    def listing_5() -> None:
        df = spark \
            .readStream \
            .format("yt") \
            .option("consumer_path", consumer_path) \
            .option("max_rows_per_partition", 1000) \
            .load(queue_path)

        query = df\
            .writeStream \
            .outputMode("append") \
            .format("yt") \
            .option("checkpointLocation", checkpoints_path) \
            .option("path", result_table_path) \
            .start()
        query.awaitTermination()

    # The listing's session: `.config("spark.yt.write.dynBatchSize", 100)`.
    with session_conf(spark, spark__yt__write__dynBatchSize="100"):
        run_listing(spark, listing_5, row_count(yt, result_table_path, len(rows)))
    assert multiset(ordered_rows(yt, result_table_path), "data", "n") == multiset(rows, "data", "n")
    # Tasks of 1000 and 500 rows per tablet, inserted in calls of 100 rows (each stored as one chunk).
    assert stored_chunks(storage_root, result_table_path) == [100] * 30
    assert checkpointed(spark, checkpoints_path, queue_path) == {0: 1499, 1: 1499}


COMPOSITE_SCHEMA = [
    {"name": "id", "type": "int64"},
    {"name": "tags", "type_v3": {"type_name": "optional", "item": {"type_name": "list", "item": "string"}}},
    {"name": "point", "type_v3": {"type_name": "optional", "item": {"type_name": "struct", "members": [
        {"name": "x", "type": "int64"}, {"name": "y", "type": "double"}]}}},
]


@pytest.mark.parametrize("type_v3", [True, False], ids=["type_v3", "yson"])
def test_listing_6_composite_types_round_trip(spark, yt, yt_root, type_v3):
    """With `parsing_type_v3`/`write_type_v3` (the listing) and without both (YSON both ways, SPYT's default)."""
    consumer_path, queue_path = f"{yt_root}/consumer", f"{yt_root}/queue"
    checkpoints_path, result_table_path = f"yt:/{yt_root}/checkpoints", f"{yt_root}/result"
    make_queue(yt, queue_path, partitions=1, consumer=consumer_path, schema=COMPOSITE_SCHEMA)
    rows = [{"id": i, "tags": [f"t{j}" for j in range(i % 3)], "point": {"x": i, "y": i / 2} if i % 4 else None}
            for i in range(20)]
    yt.insert_rows(queue_path, rows)
    make_table(yt, result_table_path, COMPOSITE_SCHEMA)

    def listing_6() -> None:
        df = spark \
            .readStream \
            .format("yt") \
            .option("consumer_path", consumer_path) \
            .option("parsing_type_v3", str(type_v3).lower()) \
            .load(queue_path)

        query = df\
            .writeStream \
            .outputMode("append") \
            .format("yt") \
            .option("write_type_v3", type_v3) \
            .option("checkpointLocation", checkpoints_path) \
            .option("path", result_table_path) \
            .start()
        query.awaitTermination()

    run_listing(spark, listing_6, row_count(yt, result_table_path, len(rows)))
    assert sorted(ordered_rows(yt, result_table_path), key=lambda r: r["id"]) == rows
    assert checkpointed(spark, checkpoints_path, queue_path) == {0: 19}

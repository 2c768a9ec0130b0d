"""The demo's scenario: its queue, consumer and result table, and the seed listing 3 pipeline that joins them."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from opsd.config.models import (
    HttpSettings,
    LoggingSettings,
    OpsdConfig,
    PipelineConfig,
    SinkConfig,
    SourceConfig,
    SparkSettings,
    TransformConfig,
    TriggerConfig,
)
from streaming_core.cluster import Cluster, connect

QUEUE = "//home/demo/queue"
CONSUMER = "//home/demo/consumer"
RESULT = "//home/demo/result"
CHECKPOINT = "yt:///home/demo/checkpoints"
QUEUE_SCHEMA = [{"name": "data", "type": "string"}]
RESULT_SCHEMA = [{"name": "data", "type": "string"}, {"name": "data_length", "type": "int32"}]
#: Seed listing 3 as a SQL transform.
TRANSFORM_SQL = "SELECT data, length(data) AS data_length FROM source"
PIPELINE = "data_length"


@dataclass(frozen=True)
class DemoSettings:
    rate: float = 2000
    duration: float = 30
    partitions: int = 2
    port: int = HttpSettings().port
    root: str = ".opsd/demo"
    max_rows_per_partition: int = 20_000


def prepare_cluster(root: Path, partitions: int) -> Cluster:
    """A fresh embedded cluster with the demo's queue, registered consumer and result table."""
    shutil.rmtree(root, ignore_errors=True)
    cluster = connect(f"local://{root}")
    cluster.create("table", QUEUE, recursive=True,
                   attributes={"dynamic": True, "tablet_count": partitions, "schema": QUEUE_SCHEMA})
    cluster.create_consumer(CONSUMER, recursive=True)
    cluster.register_queue_consumer(QUEUE, CONSUMER)
    cluster.create("table", RESULT, recursive=True, attributes={"dynamic": True, "schema": RESULT_SCHEMA})
    return cluster


def demo_config(settings: DemoSettings, root: Path) -> OpsdConfig:
    pipeline = PipelineConfig(
        name=PIPELINE,
        source=SourceConfig(format="yt", path=QUEUE, options={
            "consumer_path": CONSUMER, "max_rows_per_partition": str(settings.max_rows_per_partition)}),
        transform=TransformConfig(sql=TRANSFORM_SQL),
        sink=SinkConfig(format="yt", path=RESULT),
        trigger=TriggerConfig(processing_time="1 second"),
        checkpoint_location=CHECKPOINT,
    )
    # Spark's logs go to the demo's log file, as JSON lines like opsd's own.
    return OpsdConfig(cluster=f"local://{root}", spark=SparkSettings(master="local[2]", app_name="opsd-demo"),
                      http=HttpSettings(port=settings.port), logging=LoggingSettings(format="json"),
                      pipelines=[pipeline])


def rows_in_result(cluster: Cluster) -> int:
    return sum(t.total_row_count for t in cluster.get_tablet_infos(RESULT))

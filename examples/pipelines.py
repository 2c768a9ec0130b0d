"""The Python callables the example configs name: a transform (`pipelines:upper_case`) and a foreachBatch sink
(`pipelines:append_with_batch_id`). opsd imports them by reference, so run opsd with `PYTHONPATH=examples`."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

#: Where `append_with_batch_id` writes (an ordered table with columns data:string, batch_id:int64).
BATCH_TABLE = "//home/app/clicks_per_batch"


def upper_case(df: DataFrame) -> DataFrame:
    """The transform: the queue's `data` column in upper case."""
    return df.select(F.upper("data").alias("data"))


def append_with_batch_id(df: DataFrame, batch_id: int) -> None:
    """The foreachBatch sink: each micro-batch appended with its batch id, a plain batch write."""
    df.select("data", F.lit(batch_id).cast("long").alias("batch_id")).write.format("yt").mode("append").save(
        BATCH_TABLE)

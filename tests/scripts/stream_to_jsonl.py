"""Run a `yt` stream to a JSON-lines file, one line per row with its batch id; used by the fault tests.

    python tests/scripts/stream_to_jsonl.py CLUSTER_URI QUEUE CONSUMER CHECKPOINT OUTPUT
        [--master local[2]] [--max-rows N] [--hang-on-batch K --marker PATH]

With `--hang-on-batch K`, batch K writes its rows, then creates MARKER and sleeps until killed: the
parent kills the driver while that batch is still being processed (its output written, the batch not
yet committed). A marker that already exists disables the hang, so a restarted run completes.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from streaming_core import spark_session


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("cluster", "queue", "consumer", "checkpoint", "output"):
        parser.add_argument(name)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-rows", type=int)
    parser.add_argument("--hang-on-batch", type=int)
    parser.add_argument("--marker", type=Path)
    args = parser.parse_args()

    def write_batch(batch_df, batch_id: int) -> None:
        rows = [{"batch": batch_id, "n": r["n"]} for r in batch_df.select("n").collect()]
        with open(args.output, "a") as out:
            out.writelines(json.dumps(r) + "\n" for r in rows)
            out.flush()
            os.fsync(out.fileno())
        if batch_id == args.hang_on_batch and not args.marker.exists():
            args.marker.write_text(str(os.getpid()))
            time.sleep(3600)

    conf = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "512m"}
    with spark_session("stream-to-jsonl", master=args.master, cluster=args.cluster, conf=conf) as spark:
        reader = spark.readStream.format("yt").option("consumer_path", args.consumer)
        if args.max_rows:
            reader = reader.option("max_rows_per_partition", args.max_rows)
        query = (reader.load(args.queue).writeStream.foreachBatch(write_batch)
                 .option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()


if __name__ == "__main__":
    main()

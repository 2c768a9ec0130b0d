"""Driver for the stop-during-write tests: a query whose `foreachBatch` function writes a large DataFrame with
`df.write.format("yt")`, stopped while that write runs.

Usage: `python foreach_batch_stop_driver.py CLUSTER_URI SCENARIOS_JSON OUT_JSON`; each scenario is
`{"target": "//...", "rows": 3000000, "stop_after": 1.5}`: the write appends `rows` rows of 100 bytes to `target`
(whatever is there: an existing static table, a dynamic table, or nothing), and `stop_after` seconds after the
write started the query is stopped. Scenarios run one after the other in this process (one Spark start). For each,
OUT_JSON gets `{"target", "stopped_in", "exception", "batches_written"}`. The JVM's stderr is this process's: the
test reads it for what Spark prints outside its logs (a stream thread's uncaught error).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from streaming_core import build_session

#: How long a stop may take before the scenario is reported as hung.
STOP_TIMEOUT_S = 60


def run(spark, scenario: dict, checkpoint: str) -> dict:
    started, written = threading.Event(), []

    def write(df, batch_id: int) -> None:
        rows = spark.range(0, scenario["rows"], numPartitions=4).selectExpr("id", "repeat('x', 100) AS payload")
        started.set()
        rows.write.format("yt").mode("append").save(scenario["target"])
        written.append(batch_id)

    query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load()
             .writeStream.foreachBatch(write).option("checkpointLocation", checkpoint).start())
    if not started.wait(120):
        raise RuntimeError("the foreachBatch write never started")
    time.sleep(scenario["stop_after"])
    began = time.monotonic()
    stopper = threading.Thread(target=query.stop, daemon=True)
    stopper.start()
    stopper.join(STOP_TIMEOUT_S)
    exception = query.exception()
    return {"target": scenario["target"], "stopped_in": None if stopper.is_alive() else time.monotonic() - began,
            "exception": None if exception is None else str(exception)[:2000], "batches_written": written}


def main() -> None:
    cluster, scenarios, out = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
    spark = build_session("foreach-batch-stop", master="local[2]", cluster=cluster, conf={
        "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"})
    results = [run(spark, s, str(out.parent / f"checkpoint-{i}")) for i, s in enumerate(scenarios)]
    out.write_text(json.dumps(results))
    spark.stop()


if __name__ == "__main__":
    main()

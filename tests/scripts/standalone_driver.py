"""A driver on a Spark standalone cluster: for each mode, copy a queue into a table with one `availableNow` query.

    python tests/scripts/standalone_driver.py MASTER CLUSTER ROOT CHECKPOINTS MODE [MODE ...]

MODE is `at-least-once` or `transactional` (`spark.yt.streaming.transactional`); mode M reads `ROOT/queue` through
the consumer `ROOT/consumer-M` into the ordered table `ROOT/out-M`. Prints one JSON line per mode: the mode, the
query's seconds from start to end, when it ended (seconds since the epoch) and the failure's text (null when it
succeeded). The driver's token is its own
`YT_TOKEN`; the executors have whatever their workers' environment gives them.
"""

from __future__ import annotations

import json
import sys
import time

from pyspark.errors import StreamingQueryException

from streaming_core import spark_session

#: Small executors: the whole cluster shares a test machine.
CONF = {"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "512m", "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def main() -> None:
    master, cluster, root, checkpoints, *modes = sys.argv[1:]
    with spark_session("standalone-test", master=master, cluster=cluster, conf=CONF) as spark:
        for mode in modes:
            started = time.monotonic()
            query = (spark.readStream.format("yt").option("consumer_path", f"{root}/consumer-{mode}")
                     .load(f"{root}/queue")
                     .writeStream.format("yt").option("path", f"{root}/out-{mode}")
                     .option("transactional", str(mode == "transactional").lower())
                     .option("checkpointLocation", f"{checkpoints}/{mode}")
                     .trigger(availableNow=True).start())
            try:
                query.awaitTermination()
                error = None
            except StreamingQueryException as e:
                error = str(e)
            print(json.dumps({"mode": mode, "seconds": round(time.monotonic() - started, 2), "ended": time.time(),
                              "error": error}), flush=True)


if __name__ == "__main__":
    main()

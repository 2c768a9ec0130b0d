"""Your own Structured Streaming script, monitored by opsd with one call: `opsd.attach(spark)` serves /metrics,
/healthz, /readyz and /status for the session's queries and runs opsd's checks (stalls, offset desync, lag).

    python examples/attach.py        # then: curl -s localhost:9108/status; opsd status --url http://127.0.0.1:9108
"""

from __future__ import annotations

import opsd
from streaming_core import spark_session

QUEUE, CONSUMER, RESULT = "//home/app/clicks", "//home/app/clicks_attach_consumer", "//home/app/clicks_attach"


def main() -> None:
    with spark_session() as spark:  # the embedded cluster at .opsd/cluster, or $OPSD_CLUSTER / $YT_PROXY
        monitor = opsd.attach(spark, port=9108)
        try:
            query = (spark.readStream.format("yt").option("consumer_path", CONSUMER).load(QUEUE)
                     .writeStream.format("yt").queryName("clicks_attach")
                     .option("checkpointLocation", "yt:///home/app/checkpoints/clicks_attach")
                     .option("path", RESULT).trigger(processingTime="5 seconds").start())
            query.awaitTermination()
        finally:
            monitor.detach()


if __name__ == "__main__":
    main()

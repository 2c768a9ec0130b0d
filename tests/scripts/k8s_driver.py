"""A Spark driver in `k8s://` client mode from the chart's rendered opsd config, against the Kubernetes API stand-in.

    python tests/scripts/k8s_driver.py CONFIG API_URL ROOT

CONFIG is the rendered `config.yaml` where the driver pod's ConfigMap volume put it; ROOT is the directory that stands
for every pod's filesystem (`tests.support.kube_api`). The session's conf is opsd's (`spark_defaults` of that config:
the chart's `spark.kubernetes.*`, `spark.driver.*` and RPC authentication conf included), with only what this machine
needs laid over it: the API stand-in as master, the driver's address on loopback (no cluster DNS here), the executor
pod watcher off (the stand-in polls), small executors, and the chart's container paths under ROOT. The first pipeline
(a `yt` source into a `yt` sink) runs as one `availableNow` query; prints a JSON line (`error`: null when it
succeeded), then keeps the session (and its executors) until stdin closes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.errors import StreamingQueryException

from opsd.config.load import load_config
from opsd.config.spark import spark_defaults
from streaming_core import build_session

#: Conf values that are paths inside the driver's or the executors' containers.
CONTAINER_PATHS = ("spark.kubernetes.executor.podTemplateFile", "spark.authenticate.secret.file")
MACHINE = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
           "spark.kubernetes.executor.enableApiWatcher": "false",
           "spark.kubernetes.executor.apiPollingInterval": "1s", "spark.executor.instances": "1",
           "spark.executor.memory": "512m", "spark.driver.memory": "512m", "spark.ui.port": "0",
           "spark.sql.shuffle.partitions": "2"}


def main() -> None:
    config_path, api, root = sys.argv[1:]
    config = load_config(Path(config_path))
    conf = spark_defaults(config)
    conf |= {key: f"{root}/{conf[key].lstrip('/')}" for key in CONTAINER_PATHS} | MACHINE
    pipeline = config.pipelines[0]
    spark = build_session("k8s-test", master=f"k8s://{api}", cluster=config.cluster, conf=conf)
    try:
        query = (spark.readStream.format("yt").options(**pipeline.source.options).load(pipeline.source.path)
                 .writeStream.format("yt").option("path", pipeline.sink.path)
                 .option("checkpointLocation", f"{root}/checkpoint").trigger(availableNow=True).start())
        try:
            query.awaitTermination()
            error = None
        except StreamingQueryException as e:
            error = str(e)[-3000:]
        print(json.dumps({"error": error, "app_id": spark.sparkContext.applicationId}), flush=True)
        sys.stdin.read()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

"""Spark sessions wired for the `yt` data source, like SPYT's `spyt.spark_session()`.

`spark_session()` builds (or reuses) a session with the `yt` format registered and, on the embedded
cluster, `yt:///...` checkpoint locations stored under the cluster root through Hadoop's overload
scheme (no code: `ViewFileSystemOverloadScheme` with a link fallback to `file:///<root>`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from .cluster import resolve_uri, yt_proxy
from .datasource import register
from .log import get_logger
from .options import CONF_CLUSTER
from .worker_python import launcher_path

log = get_logger(__name__)

#: SPYT's Hadoop file system for `yt:///` paths on a real cluster.
YT_FILE_SYSTEM = "tech.ytsaurus.spyt.fs.YtFileSystem"
CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def require_java() -> None:
    """Fail early, with the fix, when Spark could not start for lack of Java."""
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("Java 17 is required by Spark and 'java' is not on PATH: "
                           "install it (apt-get install -y openjdk-17-jre-headless) or set JAVA_HOME")


def spyt_jars() -> list[str]:
    """SPYT's jars from the `ytsaurus-spyt` wheel (the `spyt` extra), Scala 2.13 as Spark 4 needs; [] without it."""
    spec = importlib.util.find_spec("spyt")
    if spec is None or not spec.submodule_search_locations:
        return []
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return sorted(str(jar) for folder in ("common", "scala-2.13") for jar in (jars / folder).glob("*.jar"))


def checkpoint_conf(cluster_uri: str) -> dict[str, str]:
    """Spark conf that makes `yt:///...` paths usable as checkpoint locations on this cluster.

    On the embedded cluster they map to `<root>/...`; on YTsaurus SPYT's `YtFileSystem` serves them, with
    its jars taken from the `ytsaurus-spyt` wheel (`pip install 'yt-streaming-opsd[spyt]'`).
    """
    uri = resolve_uri(cluster_uri)
    if uri.startswith("local://"):
        root = uri[len("local://"):]
        return {
            "spark.hadoop.fs.yt.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme",
            "spark.hadoop.fs.viewfs.mounttable.default.linkFallback": f"file://{root}",
            "spark.hadoop.fs.yt.impl.disable.cache": "true",
            "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
        }
    conf = {"spark.hadoop.yt.proxy": yt_proxy(uri)[0]}
    jars = spyt_jars()
    if not jars:
        log.warning("spyt_filesystem_missing", cluster=uri, fix="pip install 'yt-streaming-opsd[spyt]'",
                    effect="yt:/// checkpoint locations are not mapped")
        return conf
    return {**conf, "spark.hadoop.fs.yt.impl": YT_FILE_SYSTEM, "spark.jars": ",".join(jars)}


def worker_socket_conf() -> dict[str, str]:
    """Spark conf that connects the JVM to its Python workers (read and write tasks, the streaming source's runner, the
    sink's commit) through Unix domain sockets where the platform has them, rather than loopback TCP.

    Over loopback TCP a Python data source's micro-batch stalls ~45 ms in its task's socket exchange (Nagle's algorithm
    against delayed acknowledgements, whatever the batch's size): a trivial Python source into `noop` took 91 ms of
    `addBatch` per batch over TCP and 46 ms over Unix sockets, a queue into a `yt` table 117 ms and 62 ms, and row
    latency fell with it (`bench.latency`, `docs/tuning.md`). Spark creates the sockets in `java.io.tmpdir` (`/tmp`,
    which the chart keeps writable), readable only through file permissions where TCP uses a secret.
    """
    return {"spark.python.unix.domain.socket.enabled": "true"} if hasattr(socket, "AF_UNIX") else {}


def activate(spark: SparkSession) -> None:
    """Make `spark` the JVM's active session in the calling thread; call it before starting a query there.

    PySpark pins each Python thread to its own JVM thread; in a new thread the JVM has no active session
    and formats registered with the session (`yt`) are not found when a query starts.
    """
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def build_session(app_name: str = "yt-streaming", *, master: str = "local[*]", cluster: str | None = None,
                  conf: Mapping[str, Any] | None = None) -> SparkSession:
    """A session (new or the active one, reconfigured) with the `yt` format registered."""
    require_java()
    os.environ.setdefault("PYSPARK_PYTHON", launcher_path())
    uri = resolve_uri(cluster)
    builder = SparkSession.builder.appName(app_name).master(master)
    user = {k: str(v) for k, v in (conf or {}).items()}
    ours = checkpoint_conf(uri)
    if "spark.jars" in ours and user.get("spark.jars"):
        user["spark.jars"] = f"{user['spark.jars']},{ours['spark.jars']}"
    settings = {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false", CONF_CLUSTER: uri,
                **worker_socket_conf(), **ours, **user}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


@contextlib.contextmanager
def spark_session(app_name: str = "yt-streaming", **kwargs: Any) -> Iterator[SparkSession]:
    """`with spark_session() as spark:` as in the SPYT examples; stops the session on exit."""
    spark = build_session(app_name, **kwargs)
    try:
        yield spark
    finally:
        spark.stop()

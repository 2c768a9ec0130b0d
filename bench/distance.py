"""The cost of distance: a bench's measurement on `local[2]` (tasks in the driver's JVM) repeated on
`local-cluster[2,1,1024]` (two executor JVMs of one core each, as a standalone cluster's: tasks and results
serialized between JVMs, each executor with its own Python workers), in the same run, and their ratio.

One JVM holds one SparkContext, so the `local-cluster` side runs in a child process (`python -m <bench>
--local-cluster ROOT`) over the same cluster root, after the parent's session stopped. Its executors get the driver's
environment (`PYSPARK_PYTHON` included, which `local-cluster` needs in the environment) and write their `work/app-*`
folders under `SPARK_HOME`, so that is pointed at a folder of links to PySpark's parts under ROOT instead of the
installed package (ARCHITECTURE's facts on `local-cluster`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from streaming_core.worker_python import launcher_path

LOCAL_CLUSTER = "local-cluster[2,1,1024]"
#: What the child is given to run the bench's `local-cluster` side.
FLAG = "--local-cluster"


def spark_home_of_links(root: Path) -> Path:
    """A `SPARK_HOME` under `root` of links to the installed PySpark's `bin`, `jars`, `python` and `sbin`."""
    import pyspark

    installed = Path(pyspark.__file__).parent
    home = root / "spark-home"
    home.mkdir(parents=True, exist_ok=True)
    for part in ("bin", "jars", "python", "sbin"):
        link = home / part
        if not link.exists():
            link.symlink_to(installed / part)
    return home


def on_local_cluster(module: str, root: str) -> dict[str, Any]:
    """Run `python -m module --local-cluster root` and return the JSON object its last line prints."""
    env = {**os.environ, "SPARK_HOME": str(spark_home_of_links(Path(root))), "PYSPARK_PYTHON": launcher_path()}
    child = subprocess.run([sys.executable, "-m", module, FLAG, root], env=env, capture_output=True, text=True,
                           cwd=Path(__file__).parent.parent)
    if child.returncode != 0:
        print(child.stderr[-3000:], file=sys.stderr)
        raise RuntimeError(f"{module} on {LOCAL_CLUSTER} failed with exit code {child.returncode}")
    print(child.stdout.rstrip())
    return json.loads(child.stdout.strip().splitlines()[-1])

"""Spark on Kubernetes as the chart sets it up, as far as this machine allows: a real Spark driver in `k8s://` client
mode, with the chart's rendered conf and executor pod template, against a Kubernetes API server stand-in; each
executor pod Spark creates is started as a local process exactly as its spec says (`tests.support.kube_api.Kubelet`:
the image's entrypoint with the pod's args, env with `secretKeyRef`s resolved from the Secrets, the mounted files).
The executor registers with the driver, and a micro-batch runs through it, reading and writing through the YTsaurus
stand-in with the token from the Secret. Deleting the driver's pod takes its executors (ownerReferences).

What only a real cluster proves: the kubelet, image pulls, cluster DNS (the driver Service's name; here the driver is
on loopback), NetworkPolicies, the API server's admission and RBAC (the Role), and watches (off here: Spark polls).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import uuid
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from tests.support.cluster import make_queue
from tests.support.kube_api import KubeApi, Kubelet, rooted
from tests.support.sink import COPY_SCHEMA, fill_queue, make_table, multiset, ordered_rows
from tests.support.standin import STANDIN_TOKEN
from tests.support.wait import wait_until

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
CHART_DIR = ROOT / "helm" / "opsd"
VALUES = ROOT / "examples" / "values" / "spark-on-kubernetes.yaml"
DRIVER = Path(__file__).parent / "scripts" / "k8s_driver.py"
RELEASE, NAMESPACE = "stream", "streaming"
#: The image's entrypoint (Dockerfile ENTRYPOINT), from the source tree.
ENTRYPOINT = [str(ROOT / "scripts" / "opsd-entrypoint")]
ROWS_PER_TABLET = 500
DRIVER_SECONDS = 180.0


def image_env(home: Path) -> dict[str, str]:
    """The image's environment on this machine: the venv's bin first on PATH, this tree importable, Java."""
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(home),
           "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", "")}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return {k: v for k, v in env.items() if v}


def rendered(yt_root: str, cluster: str) -> list[dict]:
    values = yaml.safe_load(VALUES.read_text())
    values["config"]["cluster"] = cluster
    [pipeline] = values["config"]["pipelines"]
    pipeline["source"]["path"] = f"{yt_root}/queue"
    pipeline["source"]["options"] = {"consumer_path": f"{yt_root}/consumer"}
    pipeline["sink"]["path"] = f"{yt_root}/out"
    with helm.Chart.load(CHART_DIR) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    return [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]


def driver_result(out: Path, driver: subprocess.Popen) -> str | None:
    """The driver's result line (its stdout also has the driver JVM's log lines); `{}` once it exited without one."""
    line = next((line for line in out.read_text().splitlines() if line.startswith('{"error"')), None)
    return line or ("{}" if driver.poll() is not None else None)


def test_an_executor_pod_spark_makes_from_the_chart_runs_registers_and_processes_a_batch(
        standin, standin_cluster, tmp_path):
    yt, yt_root = standin_cluster, f"//tmp/k8s-{uuid.uuid4().hex[:8]}"
    make_queue(yt, f"{yt_root}/queue", partitions=2, consumer=f"{yt_root}/consumer")
    written = fill_queue(yt, f"{yt_root}/queue", ROWS_PER_TABLET)
    make_table(yt, f"{yt_root}/out", COPY_SCHEMA)

    objects = rendered(yt_root, standin.uri)
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap" and "config.yaml" in o["data"]]
    values = yaml.safe_load(VALUES.read_text())
    cluster_secrets = {values["ytToken"]["existingSecret"]: {"token": STANDIN_TOKEN},
                       values["sparkOnKubernetes"]["authSecret"]["existingSecret"]: {"secret": secrets.token_hex(32)}}
    root, logs = tmp_path / "pods", tmp_path / "logs"
    logs.mkdir()

    with KubeApi(NAMESPACE) as api, Kubelet(api, root, entrypoint=ENTRYPOINT, image_env=image_env(root / "tmp"),
                                             secrets=cluster_secrets, logs=logs) as kubelet:
        api.create("configmaps", config_map)
        pod_spec = deployment["spec"]["template"]
        driver_pod = api.create("pods", {"metadata": {"name": f"{RELEASE}-opsd-7d9f-x2x4q", **pod_spec["metadata"]},
                                         "spec": pod_spec["spec"]})
        [container] = driver_pod["spec"]["containers"]
        kubelet.mount(driver_pod, container)
        kubelet.running(driver_pod["metadata"]["name"])  # Spark waits for its driver pod to be ready
        driver = subprocess.Popen(
            [sys.executable, str(DRIVER), str(rooted(root, "/etc/opsd/config.yaml")), api.url, str(root)],
            env=kubelet.environment(driver_pod, container), stdin=subprocess.PIPE,
            stdout=(logs / "driver.out").open("w"), stderr=(logs / "driver.log").open("w"), text=True)
        try:
            result = json.loads(wait_until(lambda: driver_result(logs / "driver.out", driver), DRIVER_SECONDS,
                                           lambda: (logs / "driver.log").read_text()[-3000:]))
            assert result.get("error", "no result") is None, result or (logs / "driver.log").read_text()[-3000:]
            [executor] = api.list("pods", "spark-role=executor")
            # Spark built it from the template, owned by the driver pod (spark.kubernetes.driver.pod.name).
            assert executor["spec"]["containers"][0].get("command") is None
            assert executor["spec"]["containers"][0]["args"] == ["executor"]
            assert [(r["kind"], r["uid"]) for r in executor["metadata"]["ownerReferences"]] == [
                ("Pod", driver_pod["metadata"]["uid"])]
            name = executor["metadata"]["name"]
            assert "Successfully registered with driver" in (logs / f"{name}.log").read_text()
            assert multiset(ordered_rows(yt, f"{yt_root}/out"), "data", "n") == multiset(written, "data", "n")

            api.delete("pods", driver_pod["metadata"]["name"])  # the driver's pod goes: its executors with it
            assert api.list("pods", "spark-role=executor") == []
            wait_until(lambda: kubelet.processes[name].poll() is not None, 30, "the executor's process to end")
        finally:
            driver.stdin.close()
            driver.wait(timeout=120)
    print(json.dumps({"requests": sorted({f"{m} {p.split('?')[0]}" for m, p in api.requests})}))

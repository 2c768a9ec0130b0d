"""The image's entrypoint (`scripts/opsd-entrypoint`): `executor`, what Spark on Kubernetes runs in an executor pod,
starts Spark's executor backend from the environment Spark sets, as Spark's own image entrypoint does; anything else
runs `opsd`. Run for real with bash, `java` and `opsd` replaced on PATH by recorders of their argv (the real
executor is started from a Spark-made pod spec in the Kubernetes test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "scripts" / "opsd-entrypoint"
BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
#: The environment Spark's BasicExecutorFeatureStep gives an executor pod (values as Spark writes them).
SPARK_EXECUTOR_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@stream-opsd-driver.streaming.svc:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_EXECUTOR_MEMORY": "1024m",
    "SPARK_APPLICATION_ID": "spark-0123456789abcdef",
    "SPARK_EXECUTOR_POD_IP": "10.1.2.3",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_POD_NAME": "opsd-exec-3",
    "SPARK_CONF_DIR": "/opt/spark/conf",
    "SPARK_JAVA_OPT_10": "-Dspark.driver.blockManager.port=7079",
    "SPARK_JAVA_OPT_2": "-Dspark.driver.port=7078",
    "SPARK_JAVA_OPT_0": "-Djava.net.preferIPv6Addresses=false",
}
RECORDER = f"""#!{sys.executable}
import json, os, sys
print(json.dumps({{"program": os.path.basename(sys.argv[0]), "argv": sys.argv[1:]}}))
"""


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH directory whose `java` and `opsd` print what they were started with."""
    for name in ("java", "opsd"):
        program = tmp_path / name
        program.write_text(RECORDER)
        program.chmod(0o755)
    return tmp_path


def run(bin_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_") and k != "JAVA_HOME"}
    # As in the image: the venv's bin (opsd, find_spark_home.py) on PATH, here behind the recorders.
    environ["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}:{environ['PATH']}"
    return subprocess.run([str(ENTRYPOINT), *args], env={**environ, **env}, capture_output=True, text=True,
                          timeout=30)


def started(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_without_executor_it_runs_opsd_with_the_arguments(bin_dir):
    assert started(run(bin_dir, "run", "/etc/opsd/config.yaml")) == {
        "program": "opsd", "argv": ["run", "/etc/opsd/config.yaml"]}
    assert started(run(bin_dir)) == {"program": "opsd", "argv": []}


def test_executor_starts_sparks_kubernetes_executor_backend_from_the_pods_environment(bin_dir, tmp_path):
    spark_home = tmp_path / "spark"
    run_ = started(run(bin_dir, "executor", SPARK_HOME=str(spark_home), **SPARK_EXECUTOR_ENV))
    env = SPARK_EXECUTOR_ENV
    assert run_ == {"program": "java", "argv": [
        # The JVM options in the order of their numbers, as Spark numbers them.
        env["SPARK_JAVA_OPT_0"], env["SPARK_JAVA_OPT_2"], env["SPARK_JAVA_OPT_10"],
        # A k8s:// master for the first connection's conf: Spark reads the RPC secret file only under one.
        "-Dspark.master=k8s://https://kubernetes.default.svc",
        "-Xms1024m", "-Xmx1024m",
        "-cp", f"{env['SPARK_CONF_DIR']}:{spark_home}/jars/*",
        BACKEND,
        "--driver-url", env["SPARK_DRIVER_URL"], "--executor-id", "3", "--cores", "2",
        "--app-id", env["SPARK_APPLICATION_ID"], "--hostname", env["SPARK_EXECUTOR_POD_IP"],
        "--resourceProfileId", "0", "--podName", env["SPARK_EXECUTOR_POD_NAME"],
    ]}


def test_executor_finds_pip_installed_pysparks_jars_and_takes_the_extra_class_path(bin_dir):
    import pyspark

    argv = started(run(bin_dir, "executor", SPARK_CLASSPATH="/opt/extra/*", **SPARK_EXECUTOR_ENV))["argv"]
    classpath = argv[argv.index("-cp") + 1].split(":")
    jars = Path(pyspark.__file__).parent / "jars"
    assert classpath[1] == "/opt/extra/*"
    assert Path(classpath[2]).parent.resolve() == jars.resolve() and classpath[2].endswith("/*")
    # The backend's class is in those jars (a Spark upgrade that moved it would fail here, not in a cluster).
    [kubernetes_jar] = jars.glob("spark-kubernetes_*.jar")
    assert f"{BACKEND.replace('.', '/')}.class" in zipfile.ZipFile(kubernetes_jar).namelist()


@pytest.mark.hostile
@pytest.mark.parametrize("missing", ["SPARK_DRIVER_URL", "SPARK_EXECUTOR_ID", "SPARK_EXECUTOR_POD_IP"])
def test_executor_without_sparks_environment_names_what_is_missing_and_starts_nothing(bin_dir, missing):
    result = run(bin_dir, "executor", **{k: v for k, v in SPARK_EXECUTOR_ENV.items() if k != missing})
    assert result.returncode == 64 and result.stdout == ""
    assert f"${missing} is not set" in result.stderr

"""`yt-spark-python`: which PYTHONPATH entries it leaves off, and that Spark's Python processes use it.

The launcher runs from a copy in a fake environment (`<prefix>/bin`, beside a `python` that is this
interpreter) so that each rule can be shown with entries of that environment and of another one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from streaming_core.session import worker_socket_conf
from streaming_core.worker_python import LAUNCHER, launcher_path

SCRIPT = Path(__file__).parent.parent / "scripts" / LAUNCHER
PY4J = "0.10.9.9"


@pytest.fixture
def env_prefix(tmp_path: Path) -> Path:
    """A fake environment: bin/{yt-spark-python,python} and a site-packages with PySpark's parts and py4j."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / LAUNCHER).write_bytes(SCRIPT.read_bytes())
    (prefix / "bin" / LAUNCHER).chmod(0o755)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    (prefix / "lib/python3.11/site-packages" / f"py4j-{PY4J}.dist-info").mkdir(parents=True)
    return prefix


def pythonpath_seen(launcher: Path, pythonpath: str | None, cwd: Path | None = None) -> list[str]:
    """The PYTHONPATH entries the interpreter started by `launcher` sees."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([str(launcher), "-c", "import os; print(os.environ['PYTHONPATH'])"],
                         env=env, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
    return out.split(os.pathsep) if out else []


def spark_parts(prefix: Path, py4j: str = PY4J) -> list[str]:
    """What Spark puts on a worker's PYTHONPATH for a PySpark installed under `prefix`."""
    pyspark = prefix / "lib/python3.11/site-packages/pyspark"
    return [f"{pyspark}/python/lib/pyspark.zip", f"{pyspark}/python/lib/py4j-{py4j}-src.zip",
            f"{pyspark}/jars/spark-core_2.13-4.2.1.jar"]


def test_leaves_off_this_environments_pyspark_parts_and_keeps_the_rest_in_order(env_prefix: Path) -> None:
    other = spark_parts(Path("/opt/other-env"))
    given = [*spark_parts(env_prefix), "/work/deps.zip", "", other[0], "/dir with space/*.zip"]
    assert pythonpath_seen(env_prefix / "bin" / LAUNCHER, os.pathsep.join(given)) == [
        "/work/deps.zip", other[0], "/dir with space/*.zip"]


def test_keeps_the_py4j_zip_when_another_py4j_version_is_installed(env_prefix: Path) -> None:
    given = spark_parts(env_prefix, py4j="0.10.9.7")
    assert pythonpath_seen(env_prefix / "bin" / LAUNCHER, os.pathsep.join(given)) == [given[1]]


def test_works_when_started_by_a_relative_path_and_without_pythonpath(env_prefix: Path) -> None:
    relative = Path("bin") / LAUNCHER
    assert pythonpath_seen(relative, os.pathsep.join(spark_parts(env_prefix)), cwd=env_prefix) == []
    assert pythonpath_seen(env_prefix / "bin" / LAUNCHER, None) == []


def test_passes_arguments_exit_status_and_standard_streams_through(env_prefix: Path) -> None:
    done = subprocess.run([str(env_prefix / "bin" / LAUNCHER), "-c",
                           "import sys; print(sys.argv[1:], sys.stdin.read()); sys.exit(3)", "a b", "c"],
                          input="in", capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (3, "['a b', 'c'] in")


def test_launcher_path_is_the_installed_launcher_beside_this_interpreter() -> None:
    assert launcher_path() == str(Path(sys.executable).with_name(LAUNCHER))
    assert Path(launcher_path()).read_bytes() == SCRIPT.read_bytes(), "reinstall: pip install -e ."


def test_launcher_path_falls_back_to_the_interpreter_without_a_launcher(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "python").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert launcher_path() == str(tmp_path / "python")


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Spark's Python processes cannot import tests


class WhereReader(DataSourceReader):
    """Its one row: where the Python worker that runs it imported PySpark from, its `sys.path`, and whether it was told
    to reach the JVM over a Unix domain socket (pyspark's daemon reads `PYTHON_UNIX_DOMAIN_ENABLED`)."""

    def read(self, partition: InputPartition):
        import pyspark

        yield (pyspark.__file__, json.dumps(sys.path), os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "false"))


class WhereStreamReader(DataSourceStreamReader):
    """Its offsets carry where the streaming-source runner process imported PySpark from."""

    def initialOffset(self) -> dict:
        import pyspark

        return {"at": 0, "pyspark": pyspark.__file__}

    def latestOffset(self) -> dict:
        return self.initialOffset()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return []

    def read(self, partition: InputPartition):
        return iter(())


class WhereSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "where-is-pyspark"

    def schema(self) -> str:
        return "pyspark string, path string, unix_domain string"

    def reader(self, schema) -> WhereReader:
        return WhereReader()

    def streamReader(self, schema) -> WhereStreamReader:
        return WhereStreamReader()


def test_spark_python_processes_import_the_installed_pyspark(spark, tmp_path: Path) -> None:
    """Python workers and the streaming-source runner of a `build_session` session: no zip, no jar."""
    spark.dataSource.register(WhereSource)
    installed = str(Path(launcher_path()).parent.parent)
    [(pyspark_file, path, _)] = spark.read.format(WhereSource.name()).load().collect()
    assert pyspark_file.startswith(installed) and ".zip" not in pyspark_file
    assert not [p for p in json.loads(path) if p.startswith(str(Path(pyspark_file).parent))]

    query = (spark.readStream.format(WhereSource.name()).load().writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / f"cp{uuid.uuid4().hex}")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    offsets = [s for p in query.recentProgress for s in p["sources"] if s.get("endOffset")]
    runner_pyspark = json.loads(offsets[0]["endOffset"])["pyspark"]
    assert runner_pyspark.startswith(installed) and ".zip" not in runner_pyspark


def test_spark_python_workers_reach_the_jvm_over_unix_domain_sockets(spark) -> None:
    """A `build_session` session's Python workers use Unix domain sockets (`worker_socket_conf`): over loopback TCP each
    micro-batch stalls in the task's socket exchange."""
    assert worker_socket_conf() == {"spark.python.unix.domain.socket.enabled": "true"}
    spark.dataSource.register(WhereSource)
    assert spark.read.format(WhereSource.name()).load().collect()[0].unix_domain.lower() == "true"

"""The memory sampler: which processes are the executor's Python workers, a batch's peak and baseline per pool from
the samples (high-water marks catching what falls between two samples), the pools' idle levels; and, on a real local
session, that a worker's address-space limit is the share `pool_limits` computes and the sampler reads the workers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsd.checks.oom.sampler import (
    DIRECT,
    PYTHON_WORKER,
    Direct,
    MemorySampler,
    PoolWindow,
    Sample,
    Worker,
    idle_levels,
    python_workers,
    window,
)

MB = 1024 * 1024
JVM = 100
SESSION = Path(__file__).parent / "scripts" / "oom_sampler_session.py"


def _process(proc: Path, pid: int, parent: int, command: str, vm_size_kb: int = 1000, vm_peak_kb: int = 1000) -> None:
    entry = proc / str(pid)
    entry.mkdir()
    (entry / "stat").write_text(f"{pid} (py thon) S {parent} 1 1 0")  # a name with a space, as /proc allows
    (entry / "cmdline").write_bytes(command.replace(" ", "\0").encode())
    (entry / "status").write_text(f"Name:\tpython\nVmPeak:\t{vm_peak_kb} kB\nVmSize:\t{vm_size_kb} kB\n")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A /proc of a JVM (100) with a pyspark daemon (200) and its forked workers (201, 202), a worker started on its
    own (300), the streaming source's runner (400, another limit), and a Python process outside the JVM (500)."""
    _process(tmp_path, JVM, 1, "java -cp x org.apache.spark.deploy.SparkSubmit")
    _process(tmp_path, 200, JVM, "python -m pyspark.daemon", 36_000)
    _process(tmp_path, 201, 200, "python -m pyspark.daemon", 430_000, 450_000)
    _process(tmp_path, 202, 200, "python -m pyspark.daemon", 332_000, 332_000)
    _process(tmp_path, 300, JVM, "python -m pyspark.worker", 500_000, 510_000)
    _process(tmp_path, 400, JVM, "python -m pyspark.sql.streaming.python_streaming_source_runner", 1_400_000)
    _process(tmp_path, 500, 1, "python -m pyspark.daemon", 900_000)
    (tmp_path / "self").mkdir()  # not a process
    return tmp_path


def test_the_workers_are_the_daemons_children_and_workers_started_alone_under_the_jvm(proc):
    assert sorted(python_workers(JVM, proc=proc)) == [201, 202, 300]
    assert python_workers(JVM, "my.daemon", "my.worker", proc=proc) == []


def test_a_sample_reads_each_workers_address_space_and_the_jvms_direct_memory(proc):
    sampler = MemorySampler(JVM, lambda: Direct(24 * MB, 8 * MB), clock=lambda: 10.0, proc=proc)
    sample = sampler.sample()
    assert sorted(sample.workers, key=lambda w: w.pid) == [
        Worker(201, 430_000 * 1024, 450_000 * 1024), Worker(202, 332_000 * 1024, 332_000 * 1024),
        Worker(300, 500_000 * 1024, 510_000 * 1024)]
    assert sample.direct == Direct(24 * MB, 8 * MB)


def test_a_failing_jvm_read_is_dropped_and_the_workers_are_still_sampled(proc):
    def gone() -> Direct:
        raise ConnectionRefusedError("the JVM is gone")

    sampler = MemorySampler(JVM, gone, clock=lambda: 10.0, proc=proc)
    assert sampler.sample().direct is None and sampler.direct is None
    assert len(sampler.sample().workers) == 3


def _worker(pid, size, peak=None):
    return Worker(pid, size * MB, (peak or size) * MB)


def test_a_batchs_python_peak_is_its_fattest_worker_above_what_that_worker_held_before():
    samples = [Sample(0.0, (_worker(1, 430), _worker(2, 330)), None),
               Sample(1.0, (_worker(1, 700, 700), _worker(2, 330)), None),
               Sample(2.0, (_worker(1, 520, 900), _worker(2, 340)), None),  # a peak of 900 between two samples
               Sample(3.0, (_worker(1, 520, 900), _worker(2, 330)), None)]
    assert window(samples, 0.5, 2.5) == {PYTHON_WORKER: PoolWindow(900 * MB, 430 * MB)}


def test_a_worker_forked_during_the_batch_stands_on_its_level_after_it_libraries_loaded():
    samples = [Sample(0.0, (), None),
               Sample(1.0, (_worker(7, 36),), None),
               Sample(2.0, (_worker(7, 460, 470),), None),
               Sample(3.0, (_worker(7, 425, 470),), None)]
    assert window(samples, 0.5, 2.5) == {PYTHON_WORKER: PoolWindow(470 * MB, 425 * MB)}


def test_direct_memory_takes_the_arrow_high_water_mark_when_it_rose_in_the_batch():
    before = Sample(0.0, (), Direct(8 * MB, 30 * MB))
    inside = Sample(1.0, (), Direct(24 * MB, 30 * MB))
    after = Sample(2.0, (), Direct(8 * MB, 100 * MB))  # a 100 MB Arrow batch lived between two samples
    assert window([before, inside, after], 0.5, 1.5) == {DIRECT: PoolWindow(108 * MB, 8 * MB)}
    unchanged = Sample(2.0, (), Direct(8 * MB, 30 * MB))
    assert window([before, inside, unchanged], 0.5, 1.5) == {DIRECT: PoolWindow(24 * MB, 8 * MB)}


def test_idle_levels_are_the_fattest_live_worker_and_direct_memory_at_their_lowest_lately():
    samples = [Sample(0.0, (_worker(1, 900), _worker(9, 990)), Direct(60 * MB)),
               Sample(5.0, (_worker(1, 470), _worker(2, 330)), Direct(8 * MB)),
               Sample(6.0, (_worker(1, 480), _worker(2, 330)), Direct(9 * MB))]
    assert idle_levels(samples, since=4.0) == {PYTHON_WORKER: 470 * MB, DIRECT: 8 * MB}
    assert idle_levels([], since=0.0) == {}


@pytest.mark.spark
def test_a_real_workers_address_space_limit_is_the_share_pool_limits_computes_and_the_sampler_sees_it(tmp_path):
    """In its own local session (`spark.executor.pyspark.memory` is read when Spark starts): the limit a Python worker
    runs under, read inside the worker, equals `pool_limits`' python_worker pool (the executor's memory over its
    cores), and the sampler finds that worker's address space, under the limit."""
    done = subprocess.run([sys.executable, str(SESSION), str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-3000:]
    seen = json.loads(lines[-1])
    assert seen["rlimit_as"] == seen["pool_limit"] == 384 * MB  # 768m over 2 cores
    assert seen["worker_pids"] and set(seen["task_pids"]) <= set(seen["worker_pids"])
    assert 0 < seen["python_peak"] <= seen["pool_limit"]
    assert seen["source_runner_excluded"]

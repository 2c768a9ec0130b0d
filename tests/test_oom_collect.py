"""The OOM check's collect step: pool limits from the Spark conf, stage facts and a batch's usage per
pool, bytes per row."""

import pyarrow as pa
import pytest

from opsd.checks.oom.collect import (
    StageFacts,
    batch_usage,
    execution_region,
    pool_limits,
    sample_bytes_per_row,
    size_bytes,
    stage_facts,
)
from opsd.checks.oom.evaluate import PoolUsage
from opsd.checks.oom.sampler import PoolWindow
from opsd.observe.progress import PartitionOffsets
from tests.support.cluster import make_queue

MB = 1 << 20


def test_limits_come_from_the_driver_in_local_mode_and_from_the_executors_otherwise():
    conf = {"spark.driver.memory": "512m", "spark.executor.memory": "2g", "spark.executor.pyspark.memory": "256m"}
    assert pool_limits(conf, "local[2]") == {"jvm_heap": 512 * MB, "direct": 512 * MB, "python_worker": 256 * MB,
                                             "driver_result": 1024 * MB}
    assert pool_limits(conf, "k8s://api")["jvm_heap"] == 2048 * MB
    java = {"spark.driver.extraJavaOptions": "-Dx=1 -XX:MaxDirectMemorySize=64m", "spark.driver.maxResultSize": "0"}
    assert pool_limits(java, "local[*]") == {"jvm_heap": 1024 * MB, "direct": 64 * MB}


def test_a_python_worker_is_limited_to_its_share_of_the_executors_python_memory():
    """Spark divides `spark.executor.pyspark.memory` by `spark.executor.cores` (1 unless set) per worker."""
    conf = {"spark.executor.pyspark.memory": "1g", "spark.executor.cores": "4"}
    assert pool_limits(conf, "k8s://api")["python_worker"] == 256 * MB
    with pytest.raises(ValueError, match=r"spark\.executor\.cores"):
        pool_limits({**conf, "spark.executor.cores": "0"}, "k8s://api")


def test_the_execution_region_is_the_unified_memory_spark_grants_execution():
    assert execution_region({"spark.driver.memory": "512m"}, "local[2]") == pytest.approx((512 - 300) * MB * 0.6)
    assert execution_region({"spark.executor.memory": "4g", "spark.memory.fraction": "0.5"}, "yarn") == \
        pytest.approx((4096 - 300) * MB * 0.5)
    assert execution_region({"spark.memory.offHeap.enabled": "true"}, "local[2]") is None


def test_a_memory_size_that_is_not_one_names_itself():
    assert size_bytes("1024") == 1024 * MB
    with pytest.raises(ValueError, match="'lots'"):
        size_bytes("lots")


def test_a_batch_peak_is_the_highest_over_the_stages_submitted_while_it_ran_with_sparks_own_accounting():
    def stage(when, heap, python=0, execution=0, spilled=0, results=0):
        return {"submissionTime": f"2026-11-22T10:00:{when:02d}.000GMT", "memoryBytesSpilled": spilled,
                "resultSize": results,
                "peakExecutorMetrics": {"JVMHeapMemory": heap, "DirectPoolMemory": 10,
                                        "OnHeapExecutionMemory": execution, "ProcessTreePythonRSSMemory": python}}
    start = 1795341600.0  # 2026-11-22T10:00:00Z
    stages = [stage(1, 100, execution=40, results=5), stage(5, 300, python=70, execution=60, spilled=1, results=7),
              stage(30, 900), {"submissionTime": None}]
    assert stage_facts(stages, start, start + 10) == StageFacts(
        {"jvm_heap": 300.0, "direct": 10.0, "python_worker": 70.0}, execution_bytes=60.0, spilled_bytes=1.0,
        result_bytes=12.0)
    assert stage_facts(stages, start + 100, start + 110) == StageFacts()


def test_the_sampler_measures_python_workers_and_direct_memory_where_it_runs():
    facts = StageFacts({"jvm_heap": 300.0, "direct": 10.0, "python_worker": 2700.0}, 60.0, 1.0, 12.0)
    spark_only = batch_usage(facts, None)
    assert spark_only.pools == {"jvm_heap": PoolUsage(300.0), "direct": PoolUsage(10.0),
                                "python_worker": PoolUsage(2700.0), "driver_result": PoolUsage(12.0)}
    assert (spark_only.execution_bytes, spark_only.spilled) == (60.0, True)
    sampled = batch_usage(facts, {"direct": PoolWindow(64.0, 8.0), "python_worker": PoolWindow(900.0, 450.0)})
    assert sampled.pools["python_worker"] == PoolUsage(900.0, 450.0, sampled=True)  # a worker, not the process tree
    assert sampled.pools["direct"] == PoolUsage(64.0, 8.0, sampled=True)
    assert batch_usage(StageFacts({"jvm_heap": 1.0}), {}).pools.keys() == {"jvm_heap", "driver_result"}
    assert batch_usage(StageFacts(), None).pools == {}


def test_bytes_per_row_are_measured_on_the_rows_last_read(yt, yt_root):
    queue = f"{yt_root}/q"
    make_queue(yt, queue, partitions=2)
    yt.insert_rows(queue, pa.table({"data": ["x" * 100] * 50, "n": list(range(50))}), tablet_index=0)
    read = [PartitionOffsets(queue, 0, -1, 49, 49), PartitionOffsets(queue, 1, -1, -1, -1)]
    per_row = sample_bytes_per_row(yt, read)
    expected = pa.table({"data": ["x" * 100] * 50, "n": list(range(50))}).nbytes / 50
    assert per_row == pytest.approx(expected, rel=0.2)
    assert sample_bytes_per_row(yt, read[1:]) is None


def test_bytes_per_row_skip_the_rows_trimmed_after_the_cycle_read_the_trim(yt, yt_root):
    queue = f"{yt_root}/q"
    make_queue(yt, queue, partitions=1)
    yt.insert_rows(queue, pa.table({"data": ["x" * 10] * 40 + ["y" * 1000] * 10, "n": list(range(50))}),
                   tablet_index=0)
    yt.trim_rows(queue, 0, 40)  # a Queue Agent trims after the cycle's positions said nothing was trimmed
    read = [PartitionOffsets(queue, 0, -1, 49, 49)]
    per_row = sample_bytes_per_row(yt, read, trimmed={queue: {0: 0}})
    expected = pa.table({"data": ["y" * 1000] * 10, "n": list(range(40, 50))}).nbytes / 10
    assert per_row == pytest.approx(expected, rel=0.2)

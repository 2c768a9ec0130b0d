"""The OOM check's collect step: failure causes, pool limits from the Spark conf, stage peaks, bytes per row."""

import pyarrow as pa
import pytest

from opsd.checks.oom.collect import pool_limits, sample_bytes_per_row, size_bytes, stage_peaks
from opsd.checks.oom.failures import memory_pool_of_failure
from opsd.observe.progress import PartitionOffsets
from tests.conftest import make_queue

MB = 1 << 20


@pytest.mark.parametrize(("text", "pool"), [
    ("SparkException: Job aborted ... java.lang.OutOfMemoryError: Java heap space\n\tat x", "jvm_heap"),
    ("java.lang.OutOfMemoryError: GC overhead limit exceeded", "jvm_heap"),
    ("Lost task 0.0 in stage 0.0 (TID 0) (host executor driver): TaskResultLost (result lost from block manager)",
     "jvm_heap"),
    ("java.lang.OutOfMemoryError: Direct buffer memory", "direct"),
    ("org.apache.arrow.memory.OutOfMemoryException: Failure allocating buffer", "direct"),
    ("PythonException: An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
     "  File \"x.py\", line 1, in f\nMemoryError\n", "python_worker"),
    ("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", "python_worker"),
    ("PythonException: Traceback ...\nnumpy.core._exceptions._ArrayMemoryError: Unable to allocate 30.5 MiB for an "
     "array with shape (2, 2000000) and data type object\n", "python_worker"),
    ("Traceback ...\npyarrow.lib.ArrowMemoryError: malloc of size 67108864 failed\n", "python_worker"),
    ("py4j.protocol.Py4JNetworkError: Answer from Java side is empty", "jvm_heap"),
    ("PythonException: ... ValueError: kaboom", None),
    (None, None),
])
def test_a_failure_is_blamed_on_the_pool_whose_memory_ran_out(text, pool):
    assert memory_pool_of_failure(text) == pool


def test_limits_come_from_the_driver_in_local_mode_and_from_the_executors_otherwise():
    conf = {"spark.driver.memory": "512m", "spark.executor.memory": "2g", "spark.executor.pyspark.memory": "256m"}
    assert pool_limits(conf, "local[2]") == {"jvm_heap": 512 * MB, "direct": 512 * MB, "python_worker": 256 * MB}
    assert pool_limits(conf, "k8s://api")["jvm_heap"] == 2048 * MB
    java = {"spark.driver.extraJavaOptions": "-Dx=1 -XX:MaxDirectMemorySize=64m"}
    assert pool_limits(java, "local[*]") == {"jvm_heap": 1024 * MB, "direct": 64 * MB}


def test_a_memory_size_that_is_not_one_names_itself():
    assert size_bytes("1024") == 1024 * MB
    with pytest.raises(ValueError, match="'lots'"):
        size_bytes("lots")


def test_a_batch_peak_is_the_highest_over_the_stages_submitted_while_it_ran():
    def stage(when, heap, python=0):
        return {"submissionTime": f"2026-11-22T10:00:{when:02d}.000GMT",
                "peakExecutorMetrics": {"JVMHeapMemory": heap, "DirectPoolMemory": 10,
                                        "ProcessTreePythonRSSMemory": python}}
    start = 1795341600.0  # 2026-11-22T10:00:00Z
    stages = [stage(1, 100), stage(5, 300, python=70), stage(30, 900), {"submissionTime": None}]
    assert stage_peaks(stages, start, start + 10) == {"jvm_heap": 300.0, "direct": 10.0, "python_worker": 70.0}
    assert stage_peaks(stages, start + 100, start + 110) == {}


def test_bytes_per_row_are_measured_on_the_rows_last_read(yt, yt_root):
    queue = f"{yt_root}/q"
    make_queue(yt, queue, partitions=2)
    yt.insert_rows(queue, pa.table({"data": ["x" * 100] * 50, "n": list(range(50))}), tablet_index=0)
    read = [PartitionOffsets(queue, 0, -1, 49, 49), PartitionOffsets(queue, 1, -1, -1, -1)]
    per_row = sample_bytes_per_row(yt, read)
    expected = pa.table({"data": ["x" * 100] * 50, "n": list(range(50))}).nbytes / 50
    assert per_row == pytest.approx(expected, rel=0.2)
    assert sample_bytes_per_row(yt, read[1:]) is None

"""Collect what Spark's executor metrics cannot show, where opsd shares the host with the executors (local mode):
each Python worker's address space, as `spark.executor.pyspark.memory` limits it, and the JVM's direct memory as
Netty counts it.

Why not Spark's metrics:
- `spark.executor.pyspark.memory` is enforced per Python worker process: Spark divides it by the executor's cores
  (`spark.executor.cores`, 1 unless set, local mode included) and the worker sets `RLIMIT_AS` (its address space,
  `VmSize`) to that share before each task (`BasePythonRunner.compute`, `pyspark/worker.py`,
  `worker_util.setup_memory_limits`). Spark's `ProcessTreePython*Memory` sum every Python process of the executor
  (the daemon, idle workers, the streaming source's runner, which runs under another limit): neither the quantity nor
  the process the limit applies to.
- Arrow's buffers in the JVM come from Netty's allocator without a cleaner: Netty counts them against
  `-XX:MaxDirectMemorySize` (`OutOfDirectMemoryError`), while the JVM's direct buffer pool, which is all Spark's
  `DirectPoolMemory` reports, never sees them.

A `MemorySampler` polls both every `interval` seconds in a daemon thread and keeps a bounded window of samples.
For a batch's time window it gives, per pool, the peak and the baseline (what the pool held before the batch:
an idle worker's imported libraries, Netty's pooled chunks), so that the model fits only what grows with the batch.
Two high-water marks catch a peak shorter than the interval between two samples: a worker's `VmPeak` (its highest
address space since it started) and the peak of Spark's Arrow root allocator (every Arrow buffer the JVM held at
once since it started): when either rose during the window, the new mark is the window's peak (for Arrow, on top of
what Netty held before the batch).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

PYTHON_WORKER, DIRECT = "python_worker", "direct"
#: Seconds between samples (Spark's executor metrics are polled at 200 ms in opsd's sessions too).
INTERVAL_SECONDS = 0.2
#: Seconds of samples kept: longer than a batch and the OOM check's interval.
KEEP_SECONDS = 900.0
#: Seconds between two scans of the process tree for new workers (between them, only known workers are read).
RESCAN_SECONDS = 1.0
#: An idle pool's level now is the lowest of each process over this many recent seconds.
IDLE_SECONDS = 30.0
_DAEMON_MODULE, _WORKER_MODULE = "pyspark.daemon", "pyspark.worker"
_PROC = Path("/proc")


@dataclass(frozen=True)
class Worker:
    """One Python worker's address space (bytes): now, and its highest since it started."""

    pid: int
    vm_size: float
    vm_peak: float


@dataclass(frozen=True)
class Direct:
    """The JVM's direct memory (bytes): Netty's count or the buffer pool's, the larger, and the Arrow root
    allocator's high-water mark since the JVM started."""

    used: float
    arrow_peak: float = 0.0


@dataclass(frozen=True)
class Sample:
    """What the sampler read at one time (unix seconds); `direct` None when the JVM could not be asked."""

    at: float
    workers: tuple[Worker, ...]
    direct: Direct | None


@dataclass(frozen=True)
class PoolWindow:
    """A pool over a batch's window: its peak, and what it held before the batch (not the batch's doing)."""

    peak_bytes: float
    baseline_bytes: float


def worker_modules(conf: Mapping[str, str]) -> tuple[str, str]:
    """The daemon's and the worker's module from the Spark conf (`spark.python.daemon.module`, `...worker.module`)."""
    return (conf.get("spark.python.daemon.module", _DAEMON_MODULE),
            conf.get("spark.python.worker.module", _WORKER_MODULE))


def descendants(root_pid: int, proc: Path = _PROC) -> list[tuple[int, int, str]]:
    """Every process under `root_pid`, parents before children, as (pid, parent pid, command line)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            parent = _parent(entry)
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        for child in children.get(pid, ()):
            found.append((child, pid, _command(proc / str(child))))
            stack.append(child)
    return found


def python_workers(root_pid: int, daemon_module: str = _DAEMON_MODULE, worker_module: str = _WORKER_MODULE,
                   proc: Path = _PROC) -> list[int]:
    """The executor's Python workers under `root_pid` (the JVM): the processes a daemon forked, and workers started
    on their own (`spark.python.use.daemon=false`). The daemons themselves and other Python processes (the streaming
    source's runner, the planner's workers: another limit) are not workers."""
    daemons: set[int] = set()
    found = []
    for pid, parent, command in descendants(root_pid, proc):
        if parent in daemons or f"-m {worker_module}" in command:
            found.append(pid)
        if parent in daemons or f"-m {daemon_module}" in command:
            daemons.add(pid)
    return found


def read_worker(pid: int, proc: Path = _PROC) -> Worker | None:
    """A process's `VmSize` and `VmPeak` (None once it is gone)."""
    values: dict[str, float] = {}
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmSize", "VmPeak"):
                values[key] = float(rest.split()[0]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    if len(values) < 2:
        return None
    return Worker(pid, values["VmSize"], values["VmPeak"])


def _parent(entry: Path) -> int | None:
    try:
        return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _command(entry: Path) -> str:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def jvm_direct_reader(jvm: Any) -> Callable[[], Direct]:
    """The driver JVM's direct memory through py4j: the larger of Netty's count (Arrow's buffers) and the JVM's
    direct buffer pool (each is held to `MaxDirectMemorySize` on its own), and the Arrow root allocator's peak."""
    netty = jvm.io.netty.util.internal.PlatformDependent
    beans = jvm.java.lang.management.ManagementFactory.getPlatformMXBeans(
        jvm.java.lang.management.BufferPoolMXBean._java_lang_class)
    pool = next(b for b in beans if b.getName() == "direct")
    arrow = jvm.org.apache.spark.sql.util.ArrowUtils.rootAllocator()
    return lambda: Direct(float(max(netty.usedDirectMemory(), pool.getMemoryUsed())),
                          float(arrow.getPeakMemoryAllocation()))


def window(samples: Iterable[Sample], start: float, end: float) -> dict[str, PoolWindow]:
    """Per pool, the peak in `[start, end]` and the baseline before it (module docstring). A worker the window saw
    start is measured from its level after the window (its libraries loaded: not the batch's), else its lowest in
    the window. The pool's peak is the worker with the highest peak, with that worker's baseline."""
    before: dict[int, Worker] = {}
    inside: dict[int, list[Worker]] = {}
    after: dict[int, Worker] = {}
    direct_before: Direct | None = None
    direct_inside: list[Direct] = []
    direct_after: Direct | None = None
    for sample in samples:
        if sample.at < start:
            before.update((w.pid, w) for w in sample.workers)
            direct_before = sample.direct or direct_before
        elif sample.at <= end:
            for w in sample.workers:
                inside.setdefault(w.pid, []).append(w)
            if sample.direct is not None:
                direct_inside.append(sample.direct)
        else:
            for w in sample.workers:
                after.setdefault(w.pid, w)
            direct_after = direct_after or sample.direct
    pools: dict[str, PoolWindow] = {}
    best: PoolWindow | None = None
    for pid, seen in inside.items():
        last, known = seen[-1], before.get(pid)
        peak = max(w.vm_size for w in seen)
        if known is None or last.vm_peak > known.vm_peak:  # its highest since it started happened in the window
            peak = max(peak, last.vm_peak)
        if known is not None:
            baseline = known.vm_size
        else:
            baseline = after[pid].vm_size if pid in after else min(w.vm_size for w in seen)
        if best is None or peak > best.peak_bytes:
            best = PoolWindow(peak, min(baseline, peak))
    if best is not None:
        pools[PYTHON_WORKER] = best
    if direct_inside:
        pools[DIRECT] = _direct_window(direct_before, direct_inside, direct_after)
    return pools


def _direct_window(before: Direct | None, inside: list[Direct], after: Direct | None) -> PoolWindow:
    peak = max(d.used for d in inside)
    base = before.used if before is not None else min(d.used for d in inside)
    mark = (after or inside[-1]).arrow_peak
    if before is not None and mark > before.arrow_peak:  # Arrow's high-water mark rose in the window
        peak = max(peak, base + mark)
    return PoolWindow(peak, min(base, peak))


def idle_levels(samples: Iterable[Sample], since: float) -> dict[str, float]:
    """Per pool, what it holds when idle now: the fattest live worker at its lowest since `since`, and the direct
    memory at its lowest since then (pools never sampled are left out)."""
    samples = list(samples)
    if not samples:
        return {}
    live = {w.pid for w in samples[-1].workers}
    lowest: dict[int, float] = {}
    direct = None
    for sample in samples:
        if sample.at < since:
            continue
        for w in sample.workers:
            if w.pid in live:
                lowest[w.pid] = min(lowest.get(w.pid, w.vm_size), w.vm_size)
        if sample.direct is not None:
            direct = sample.direct.used if direct is None else min(direct, sample.direct.used)
    levels = {}
    if lowest:
        levels[PYTHON_WORKER] = max(lowest.values())
    if direct is not None:
        levels[DIRECT] = direct
    return levels


class MemorySampler:
    """Samples the Python workers under `root_pid` and the JVM's direct memory (`direct`, e.g. `jvm_direct_reader`)
    every `interval` seconds in a daemon thread; `window` and `idle` read what it kept. A failing read is logged once
    and the sampler goes on (a JVM gone: it stops asking the JVM); it never raises into its caller."""

    def __init__(self, root_pid: int, direct: Callable[[], Direct] | None = None, *,
                 modules: tuple[str, str] = (_DAEMON_MODULE, _WORKER_MODULE), interval: float = INTERVAL_SECONDS,
                 keep_seconds: float = KEEP_SECONDS, clock: Callable[[], float] = time.time,
                 proc: Path = _PROC) -> None:
        self.root_pid = root_pid
        self.direct = direct
        self.modules = modules
        self.interval = interval
        self.clock = clock
        self.proc = proc
        self._samples: deque[Sample] = deque(maxlen=max(1, int(keep_seconds / interval)))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pids: list[int] = []
        self._scanned_at = -float("inf")
        self._warned: set[str] = set()

    @classmethod
    def for_spark(cls, context: Any) -> MemorySampler:
        """The sampler of a local-mode SparkContext: its JVM's Python workers and direct memory (Python workers
        only, logged, when the JVM cannot tell its direct memory)."""
        jvm = context._jvm
        conf = dict(context.getConf().getAll())
        try:
            direct = jvm_direct_reader(jvm)
        except Exception as e:  # a JVM without Netty or the buffer pool's bean: its direct memory goes unsampled
            log.warning("memory_sample_failed", what="direct_memory", error=f"{type(e).__name__}: {e}")
            direct = None
        return cls(int(jvm.java.lang.ProcessHandle.current().pid()), direct, modules=worker_modules(conf))

    def start(self) -> MemorySampler:
        self._thread = threading.Thread(target=self._loop, name="opsd-memory-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def sample(self) -> Sample:
        """Read once now and keep the sample."""
        now = self.clock()
        if now - self._scanned_at >= RESCAN_SECONDS:
            self._pids = self._guarded("process_tree", lambda: python_workers(self.root_pid, *self.modules,
                                                                              proc=self.proc)) or []
            self._scanned_at = now
        workers = tuple(w for w in (read_worker(pid, self.proc) for pid in self._pids) if w is not None)
        direct = self._guarded("direct_memory", self.direct) if self.direct is not None else None
        sample = Sample(now, workers, direct)
        with self._lock:
            self._samples.append(sample)
        return sample

    def window(self, start: float, end: float) -> dict[str, PoolWindow]:
        with self._lock:
            samples = list(self._samples)
        return window(samples, start, end)

    def idle(self) -> dict[str, float]:
        with self._lock:
            samples = list(self._samples)
        return idle_levels(samples, self.clock() - IDLE_SECONDS)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def _guarded(self, what: str, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except Exception as e:  # a sampler must not stop on a read it cannot make (a JVM gone, /proc unreadable)
            if what not in self._warned:
                self._warned.add(what)
                log.warning("memory_sample_failed", what=what, error=f"{type(e).__name__}: {e}")
            if what == "direct_memory":
                self.direct = None
            return None

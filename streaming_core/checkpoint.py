"""A streaming query's checkpoint as opsd reads it: the newest planned batch (`offsets/N`) and the newest committed
one (`commits/N`), with their queue offsets.

Spark's offset log (and SPYT's, which is Spark's) keeps one file per batch, `offsets/<batch id>`: a version line
(`v1`), a JSON metadata line (`batchTimestampMs`, conf), then one line per source of the query — its end offset
as JSON, or `-` for a source without one. `commits/<batch id>` exists once the batch's output is committed. A yt
source's line is `streaming_core.offsets.QueueOffset` JSON (this connector's carries `consumer_path`, SPYT's
does not); other sources' lines are kept as "not a yt offset".

Only the newest files are read: the listing of `offsets/` and `commits/`, the newest offsets file, the committed
batch's and the one before it (whose end is the committed batch's start). One write exists, for the auto-tuner
after a memory failure: `drop_planned_batch` removes a planned batch that was never committed, so that Spark plans
it again (under the cap in force) instead of replaying its range. Locations: a local path, `file://`,
or `yt:///...` — on the embedded cluster (`local:///root`) the file `<root>/...` (as `session.checkpoint_conf`
maps it for Spark), on YTsaurus Cypress files read through ytsaurus-client. Pure Python: no pyspark.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from .cluster import resolve_uri, yt_proxy
from .offsets import QueueOffset

#: The offset log version this reader understands (Spark's `OffsetSeqLog.VERSION`).
OFFSETS_VERSION = "v1"
#: A source line of an offsets file for a source that has no offset yet.
NO_OFFSET = "-"


class CheckpointFiles(Protocol):
    """Where a checkpoint's files live: list a folder (names; [] when it is missing) and read a file's text."""

    def list(self, folder: str) -> list[str]: ...

    def read(self, path: str) -> str: ...

    def remove(self, path: str) -> None: ...


class LocalFiles:
    """A checkpoint on local disk (a plain path, `file://`, or `yt:///` on the embedded cluster)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def list(self, folder: str) -> list[str]:
        path = self.root / folder
        return sorted(p.name for p in path.iterdir()) if path.is_dir() else []

    def read(self, path: str) -> str:
        return (self.root / path).read_text()

    def remove(self, path: str) -> None:
        (self.root / path).unlink(missing_ok=True)


class CypressFiles:
    """A checkpoint in Cypress on YTsaurus (SPYT's `YtFileSystem` writes file nodes), through a `YtClient`.

    Errors are the local files' own: a file that is gone (Spark removes old batches while it runs) is
    `FileNotFoundError`, any other failure of the cluster a `ClusterError` naming the path.
    """

    def __init__(self, client: Any, root: str) -> None:
        self.client = client
        self.root = root.rstrip("/")

    def list(self, folder: str) -> list[str]:
        path = f"{self.root}/{folder}"
        with _cypress_errors(path):
            return sorted(str(name) for name in self.client.list(path)) if self.client.exists(path) else []

    def read(self, path: str) -> str:
        with _cypress_errors(f"{self.root}/{path}"):
            return self.client.read_file(f"{self.root}/{path}").read().decode()

    def remove(self, path: str) -> None:
        with _cypress_errors(f"{self.root}/{path}"):
            self.client.remove(f"{self.root}/{path}", force=True)


@contextlib.contextmanager
def _cypress_errors(path: str) -> Iterator[None]:
    from yt.common import YtError  # ytsaurus-client only when a real cluster is used

    from .cluster.ytsaurus.errors import translate_error

    try:
        yield
    except YtError as err:
        if err.is_resolve_error():
            raise FileNotFoundError(f"{path}: no such file in Cypress") from None
        raise translate_error(err, path, None) from None


def _yt_client(uri: str) -> Any:
    from .cluster.ytsaurus.client import default_client_factory  # ytsaurus-client only when a real cluster is used

    proxy, config = yt_proxy(uri)
    return default_client_factory(proxy, None, config or None)


def checkpoint_files(location: str, cluster_uri: str | None = None, *,
                     yt_client: Callable[[str], Any] = _yt_client) -> CheckpointFiles:
    """The files of `location` (see the module docstring); `cluster_uri` resolves `yt:///` paths."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return LocalFiles(Path(parsed.path if parsed.scheme else location))
    if parsed.scheme != "yt":
        raise ValueError(f"checkpoint location {location!r}: expected a local path, file:// or yt:///...")
    if parsed.netloc:
        raise ValueError(f"checkpoint location {location!r}: use yt:///path (the cluster comes from the cluster URI)")
    uri = resolve_uri(cluster_uri)
    if uri.startswith("local://"):
        return LocalFiles(Path(uri[len("local://"):] + parsed.path))
    return CypressFiles(yt_client(uri), "/" + parsed.path)


@dataclass(frozen=True)
class BatchOffsets:
    """One `offsets/<batch_id>` file: when the batch was planned and each source's end offset."""

    batch_id: int
    timestamp_ms: int | None
    sources: tuple[QueueOffset | None, ...]

    def queue(self, path: str) -> QueueOffset | None:
        """The end offset of the source that reads queue `path` (None when no source does)."""
        return next((s for s in self.sources if s is not None and s.path == path), None)


@dataclass(frozen=True)
class Checkpoint:
    """The newest batches of a checkpoint. `committed_batch` is the newest `commits/N` (None: nothing committed)."""

    location: str
    newest: BatchOffsets | None
    committed_batch: int | None
    committed: BatchOffsets | None
    before_committed: BatchOffsets | None

    @property
    def planned(self) -> BatchOffsets | None:
        """The newest batch when it is planned but not committed (it runs, or the query stopped inside it)."""
        if self.newest is None or self.newest.batch_id == self.committed_batch:
            return None
        return self.newest

    @property
    def queues(self) -> tuple[QueueOffset, ...]:
        """The yt sources of the newest batch."""
        return tuple(s for s in self.newest.sources if s is not None) if self.newest else ()


def parse_offsets(text: str, batch_id: int, where: str) -> BatchOffsets:
    """The text of one `offsets/N` file; `ValueError` names the file and the line at fault."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != OFFSETS_VERSION:
        found = lines[0].strip() if lines else "an empty file"
        raise ValueError(f"{where}: line 1: expected offset log version {OFFSETS_VERSION}, found {found!r}")
    if len(lines) < 2:
        raise ValueError(f"{where}: line 2: the batch metadata line is missing")
    try:
        metadata = json.loads(lines[1])
    except ValueError as e:
        raise ValueError(f"{where}: line 2: the batch metadata is not JSON ({e})") from None
    stamp = metadata.get("batchTimestampMs") if isinstance(metadata, dict) else None
    sources = tuple(None if line.strip() == NO_OFFSET else QueueOffset.from_progress(line) for line in lines[2:])
    return BatchOffsets(batch_id, int(stamp) if stamp is not None else None, sources)


def _batch_ids(files: CheckpointFiles, folder: str) -> list[int]:
    return sorted(int(name) for name in files.list(folder) if name.isdigit())


def newest_batch(location: str, cluster_uri: str | None = None, *,
                 files: CheckpointFiles | None = None) -> tuple[int | None, bool]:
    """The newest planned batch id and whether it is committed, from the listings alone (a cheap re-check)."""
    files = files or checkpoint_files(location, cluster_uri)
    planned = _batch_ids(files, "offsets")
    if not planned:
        return None, False
    return planned[-1], planned[-1] in _batch_ids(files, "commits")


def read_checkpoint(location: str, cluster_uri: str | None = None, *,
                    files: CheckpointFiles | None = None) -> Checkpoint:
    """The newest planned and committed batches of the checkpoint at `location` (module docstring)."""
    files = files or checkpoint_files(location, cluster_uri)
    planned, committed = _batch_ids(files, "offsets"), _batch_ids(files, "commits")

    def offsets(batch_id: int | None) -> BatchOffsets | None:
        if batch_id is None or batch_id not in planned:
            return None
        return parse_offsets(files.read(f"offsets/{batch_id}"), batch_id, f"{location}/offsets/{batch_id}")

    newest_commit = committed[-1] if committed else None
    newest = offsets(planned[-1]) if planned else None
    at_commit = newest if newest and newest.batch_id == newest_commit else offsets(newest_commit)
    before = offsets(newest_commit - 1) if newest_commit is not None else None
    return Checkpoint(location, newest, newest_commit, at_commit, before)


def has_state(location: str, cluster_uri: str | None = None, *, files: CheckpointFiles | None = None) -> bool:
    """Whether the query keeps state in its checkpoint (a `state/` folder: a stateful operator ran)."""
    files = files or checkpoint_files(location, cluster_uri)
    return bool(files.list("state"))


def drop_planned_batch(location: str, batch_id: int, cluster_uri: str | None = None, *,
                       files: CheckpointFiles | None = None) -> None:
    """Remove `offsets/<batch_id>` (and Hadoop's checksum of it), so that the query's next run plans that batch
    again. Only the newest batch, and only while it is not committed: `ValueError` otherwise, and nothing is
    removed. The caller must know the sink holds no output of the batch (the query is stopped)."""
    files = files or checkpoint_files(location, cluster_uri)
    planned = _batch_ids(files, "offsets")
    if not planned or planned[-1] != batch_id:
        raise ValueError(f"{location}: batch {batch_id} is not the newest planned batch (newest: "
                         f"{planned[-1] if planned else None}); nothing removed")
    if batch_id in _batch_ids(files, "commits"):
        raise ValueError(f"{location}: batch {batch_id} is committed; nothing removed")
    files.remove(f"offsets/.{batch_id}.crc")
    files.remove(f"offsets/{batch_id}")

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

Checkpoint files are read as untrusted input: a damaged or crafted file (not UTF-8, empty, larger than
`MAX_FILE_BYTES`, JSON nested too deeply, `NaN`, a list where a number belongs, a number past a JVM long, a batch file
named with non-ASCII digits such as `offsets/١٢`) raises `CheckpointError`, naming the file and line, never another
exception. A line of a yt source (an object with `path` and `partitions`) must parse as one
(`streaming_core.offsets.QueueOffset.from_json`): a damaged one is an error, never mistaken for another source's.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from .cluster import resolve_uri, yt_proxy
from .cluster.base import FILE, LINK, MAP_NODE
from .offsets import JVM_LONG_MAX, QueueOffset, described, shorten

#: The offset log version this reader understands (Spark's `OffsetSeqLog.VERSION`).
OFFSETS_VERSION = "v1"
#: A source line of an offsets file for a source that has no offset yet.
NO_OFFSET = "-"
#: The largest checkpoint file read: Spark's offsets and commits files take a few kilobytes (one line per source).
MAX_FILE_BYTES = 8 * 1024 * 1024
#: A YTsaurus object id: four hexadecimal parts (`yt/yt/core/misc/guid.h`).
_OBJECT_ID = re.compile(r"[0-9a-f]{1,8}(-[0-9a-f]{1,8}){3}")
#: The name of a batch file as Spark writes it: the batch id (a JVM long) in ASCII decimal digits, no sign, no
#: leading zero.
_BATCH_NAME = re.compile(r"0|[1-9][0-9]{0,18}")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be what Spark (or SPYT) writes: damaged, crafted, or not a checkpoint. The message
    names the file (and the line) at fault."""


class CheckpointFiles(Protocol):
    """Where a checkpoint's files live: list a folder (names; [] when it is missing) and read a file's bytes (at most
    `limit` of them)."""

    def list(self, folder: str) -> list[str]: ...

    def read(self, path: str, limit: int) -> bytes: ...

    def remove(self, path: str) -> None: ...


class LocalFiles:
    """A checkpoint on local disk (a plain path, `file://`, or `yt:///` on the embedded cluster).

    Below the location (which may itself be a link, as configured) nothing is followed: a folder or a file that is a
    symbolic link is refused (`O_NOFOLLOW`), and only regular files are read, opened without blocking (`O_NONBLOCK`),
    so that a FIFO or a device placed in a checkpoint is an error at once, never a read that waits forever.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def list(self, folder: str) -> list[str]:
        try:
            fd = self._open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return []
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def read(self, path: str, limit: int) -> bytes:
        fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file")
            chunks, left = [], limit
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def _open(self, path: str, flags: int) -> int:
        """A descriptor of `path` below the root, each name opened relative to its folder without following a link
        (`OSError` ELOOP or ENOTDIR for one)."""
        *folders, name = [part for part in path.split("/") if part]
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for folder in folders:
                inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = inner
            return os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        (self.root / path).unlink(missing_ok=True)


class CypressFiles:
    """A checkpoint in Cypress on YTsaurus (SPYT's `YtFileSystem` writes file nodes), through a `YtClient`.

    As on local disk, below the location nothing is followed: every folder and file is looked at as itself first
    (`//...&/@`, its type and its id in one call), a Cypress link is refused, only file nodes are read, and what is
    read or listed is the object looked at, by its id (`#<id>`, each name below resolved from its folder's id): a
    node swapped for a link after the look is gone for that id, never followed.

    Errors are the local files' own: a file that is gone (Spark removes old batches while it runs) is
    `FileNotFoundError`, any other failure of the cluster a `ClusterError` naming the path.
    """

    def __init__(self, client: Any, root: str) -> None:
        self.client = client
        self.root = root.rstrip("/")

    def list(self, folder: str) -> list[str]:
        path = f"{self.root}/{folder}"
        with _cypress_errors(path):
            if not self.client.exists(path):
                return []
            return sorted(str(name) for name in self.client.list(self._node(folder, MAP_NODE)))

    def read(self, path: str, limit: int) -> bytes:
        with _cypress_errors(f"{self.root}/{path}"):
            return self.client.read_file(self._node(path, FILE)).read(limit)

    def _node(self, path: str, node_type: str) -> str:
        """The object id path (`#<id>`) of the node at `path` below the root, each node read as itself (`&`, so that a
        link is not followed to its target) below the id of the one above it: a link is refused as a symbolic link is
        on local disk (`OSError` ELOOP), and the last must be a `node_type`."""
        node, found = self.root, None
        for name in [part for part in path.split("/") if part]:
            attributes = self.client.get(f"{node}/{name}&/@", attributes=["type", "id"])
            found, node_id = str(attributes.get("type")), str(attributes.get("id"))
            if found == LINK:
                raise OSError(errno.ELOOP, "a Cypress link, not followed")
            if not _OBJECT_ID.fullmatch(node_id):
                raise OSError(errno.EINVAL, "a node without an object id")
            node = f"#{node_id}"
        if found != node_type:
            raise OSError(errno.EISDIR if node_type == FILE else errno.ENOTDIR, f"not a {node_type} node")
        return node

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


def yt_client(uri: str) -> Any:
    """A `YtClient` for a resolved YTsaurus URI, configured as the backend configures its own."""
    from .cluster.ytsaurus.client import default_client_factory  # ytsaurus-client only when a real cluster is used

    proxy, config = yt_proxy(uri)
    return default_client_factory(proxy, None, config or None)


def checkpoint_files(location: str, cluster_uri: str | None = None, *,
                     yt_client: Callable[[str], Any] = yt_client) -> CheckpointFiles:
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
    """The text of one `offsets/N` file; `CheckpointError` names the file and the line at fault."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != OFFSETS_VERSION:
        found = f"{len(lines[0])} other characters" if lines else "an empty file"
        raise CheckpointError(f"{where}: line 1: expected offset log version {OFFSETS_VERSION}, found {found} (its "
                              "content is not shown)")
    if len(lines) < 2:
        raise CheckpointError(f"{where}: line 2: the batch metadata line is missing")
    metadata = _json(lines[1], f"{where}: line 2: the batch metadata")
    stamp = metadata.get("batchTimestampMs") if isinstance(metadata, dict) else None
    if stamp is not None and (type(stamp) is not int or not 0 <= stamp <= JVM_LONG_MAX):
        raise CheckpointError(f"{where}: line 2: batchTimestampMs {described(stamp)} is not a time in milliseconds")
    sources = tuple(_source(line, f"{where}: line {n}") for n, line in enumerate(lines[2:], start=3))
    return BatchOffsets(batch_id, stamp, sources)


def _source(line: str, where: str) -> QueueOffset | None:
    """One source's end offset: a yt queue's, or None for `-` and other sources' offsets (rate, files, Kafka)."""
    if line.strip() == NO_OFFSET:
        return None
    value = _json(line, f"{where}: the source offset")
    if not (isinstance(value, dict) and "path" in value and "partitions" in value):
        return None
    try:
        return QueueOffset.from_json(value)
    except ValueError as e:
        raise CheckpointError(f"{where}: {e}") from None


def _json(text: str, what: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not a JSON number")

    try:
        return json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise CheckpointError(f"{what} is nested too deeply to be an offset") from None
    except ValueError as e:
        raise CheckpointError(f"{what} is not JSON ({shorten(str(e))})") from None


def read_text(files: CheckpointFiles, path: str, where: str) -> str:
    """A checkpoint file's text: UTF-8 and at most `MAX_FILE_BYTES`, else `CheckpointError` naming `where`."""
    try:
        data = files.read(path, MAX_FILE_BYTES + 1)
    except OSError as e:
        raise CheckpointError(f"{where}: cannot be read ({e.strerror or type(e).__name__})") from None
    if len(data) > MAX_FILE_BYTES:
        raise CheckpointError(f"{where}: larger than {MAX_FILE_BYTES} bytes: not a file Spark writes; not read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{where}: not UTF-8 text (at byte {e.start})") from None


def _batch_ids(files: CheckpointFiles, folder: str, location: str) -> list[int]:
    """The batch ids of `folder` (`offsets`, `commits`), from its file names; other files (`.N.crc`, temporary
    files) are left alone. A name that reads as a number but not as Spark writes a batch id (`١٢`, `²`, `012`,
    `+1`, past a JVM long) is a `CheckpointError`: Spark and opsd could disagree on which batch it is."""
    found = []
    for name in files.list(folder):
        if _BATCH_NAME.fullmatch(name) and int(name) <= JVM_LONG_MAX:
            found.append(int(name))
        elif name.lstrip("+-").isdigit():
            raise CheckpointError(f"{location}/{folder}/{name}: not a batch file name (Spark names batch files by "
                                  f"their id in ASCII digits 0-9, at most {JVM_LONG_MAX}); remove or rename it")
    return sorted(found)


def newest_batch(location: str, cluster_uri: str | None = None, *,
                 files: CheckpointFiles | None = None) -> tuple[int | None, bool]:
    """The newest planned batch id and whether it is committed, from the listings alone (a cheap re-check)."""
    files = files or checkpoint_files(location, cluster_uri)
    planned = _batch_ids(files, "offsets", location)
    if not planned:
        return None, False
    return planned[-1], planned[-1] in _batch_ids(files, "commits", location)


def read_checkpoint(location: str, cluster_uri: str | None = None, *,
                    files: CheckpointFiles | None = None) -> Checkpoint:
    """The newest planned and committed batches of the checkpoint at `location` (module docstring)."""
    files = files or checkpoint_files(location, cluster_uri)
    planned, committed = _batch_ids(files, "offsets", location), _batch_ids(files, "commits", location)

    def offsets(batch_id: int | None) -> BatchOffsets | None:
        if batch_id is None or batch_id not in planned:
            return None
        where = f"{location}/offsets/{batch_id}"
        return parse_offsets(read_text(files, f"offsets/{batch_id}", where), batch_id, where)

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
    planned = _batch_ids(files, "offsets", location)
    if not planned or planned[-1] != batch_id:
        raise ValueError(f"{location}: batch {batch_id} is not the newest planned batch (newest: "
                         f"{planned[-1] if planned else None}); nothing removed")
    if batch_id in _batch_ids(files, "commits", location):
        raise ValueError(f"{location}: batch {batch_id} is committed; nothing removed")
    files.remove(f"offsets/.{batch_id}.crc")
    files.remove(f"offsets/{batch_id}")

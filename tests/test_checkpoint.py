"""Reading a checkpoint's newest batches: local paths, file://, yt:/// on the embedded cluster and Cypress."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from streaming_core.checkpoint import (
    MAX_FILE_BYTES,
    CheckpointError,
    CypressFiles,
    LocalFiles,
    checkpoint_files,
    newest_batch,
    parse_offsets,
    read_checkpoint,
)
from streaming_core.offsets import QueueOffset
from tests.support.checkpoint import write_checkpoint

#: `offsets/2` as a real query of this connector wrote it (PySpark 4.2.1), conf shortened.
REAL_OFFSETS = (
    'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1795389897044,"conf":{"spark.sql.shuffle.partitions":"4"}}\n'
    '{"cluster": "local", "path": "//tmp/q", "partitions": {"0": 49, "1": 49}, "consumer_path": "//tmp/c"}')


def test_an_offsets_file_gives_the_batch_time_and_each_sources_end() -> None:
    batch = parse_offsets(REAL_OFFSETS + "\n-\n" + '{"logOffset":3}', 2, "cp/offsets/2")

    assert batch.batch_id == 2 and batch.timestamp_ms == 1795389897044
    assert batch.sources == (QueueOffset("local", "//tmp/q", {0: 49, 1: 49}, "//tmp/c"), None, None)
    assert batch.queue("//tmp/q").consumer_path == "//tmp/c"


def test_a_file_of_another_version_is_an_error_naming_file_and_line() -> None:
    with pytest.raises(ValueError, match=r"cp/offsets/7: line 1: expected offset log version v1, found 2 other "
                                         r"characters"):
        parse_offsets("v2\n{}\n", 7, "cp/offsets/7")


def test_newest_committed_and_planned_batches_are_told_apart(tmp_path: Path) -> None:
    location = write_checkpoint(tmp_path / "cp", "//q", {0: {0: 9}, 1: {0: 19}, 2: {0: 29}}, committed=1,
                                consumer="//c")
    (location / "offsets" / ".2.crc").write_text("crc files are not batches")

    checkpoint = read_checkpoint(str(location))

    assert (checkpoint.committed_batch, checkpoint.planned.batch_id) == (1, 2)
    assert checkpoint.committed.queue("//q").partitions == {0: 19}
    assert checkpoint.before_committed.queue("//q").partitions == {0: 9}
    assert newest_batch(str(location)) == (2, False)


def test_spyt_offsets_without_a_consumer_path_are_read(tmp_path: Path) -> None:
    location = write_checkpoint(tmp_path / "cp", "//q", {0: {0: 4, 1: -1}}, committed=0, cluster="hahn")

    checkpoint = read_checkpoint(f"file://{location}")

    assert checkpoint.planned is None
    assert checkpoint.committed.sources == (QueueOffset("hahn", "//q", {0: 4, 1: -1}),)
    assert checkpoint.before_committed is None


def test_an_empty_or_missing_checkpoint_has_no_batches(tmp_path: Path) -> None:
    checkpoint = read_checkpoint(str(tmp_path / "never-started"))

    assert (checkpoint.newest, checkpoint.committed_batch, checkpoint.queues) == (None, None, ())


def test_yt_paths_on_the_embedded_cluster_are_files_under_its_root(tmp_path: Path) -> None:
    files = checkpoint_files("yt:///home/q/cp", f"local://{tmp_path}")

    assert isinstance(files, LocalFiles) and files.root == tmp_path / "home/q/cp"


class FakeCypress:
    """The `YtClient` calls the Cypress reader makes: exists, get (a node's own `&/@` type and id), list and read_file
    (by object id path, `#<id>/...`)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.ids: dict[str, str] = {}

    def exists(self, path: str) -> bool:
        return any(name.startswith(path + "/") for name in self.files)

    def get(self, path: str, attributes: list[str]) -> dict[str, str]:
        node = self._resolve(path.removesuffix("&/@"))
        node_id = f"{len(self.ids) + 1:x}-0-12f-0"
        self.ids[node_id] = node
        return {"type": "file" if node in self.files else "map_node", "id": node_id}

    def list(self, path: str) -> list[str]:
        path = self._resolve(path)
        return [name[len(path) + 1:] for name in self.files if name.rsplit("/", 1)[0] == path]

    def read_file(self, path: str) -> io.BytesIO:
        return io.BytesIO(self.files[self._resolve(path)].encode())

    def _resolve(self, path: str) -> str:
        node_id, _, rest = path.removeprefix("#").partition("/")
        return self.ids[node_id] + (f"/{rest}" if rest else "") if path.startswith("#") else path


def test_yt_paths_on_ytsaurus_are_cypress_files_read_through_the_client() -> None:
    cypress = FakeCypress({"//home/q/cp/offsets/3": REAL_OFFSETS, "//home/q/cp/offsets/4": REAL_OFFSETS,
                           "//home/q/cp/commits/3": 'v1\n{"nextBatchWatermarkMs":0}'})
    proxies = []
    files = checkpoint_files("yt:///home/q/cp", "yt://hahn", yt_client=lambda uri: proxies.append(uri) or cypress)

    checkpoint = read_checkpoint("yt:///home/q/cp", files=files)

    assert isinstance(files, CypressFiles) and proxies == ["yt://hahn"]
    assert (checkpoint.committed_batch, checkpoint.planned.batch_id) == (3, 4)
    assert checkpoint.committed.queue("//tmp/q").partitions == {0: 49, 1: 49}


def test_locations_of_other_schemes_are_refused() -> None:
    with pytest.raises(ValueError, match=r"'hdfs://nn/cp': expected a local path, file:// or yt:///"):
        checkpoint_files("hdfs://nn/cp")


class BoundedCypress(FakeCypress):
    """Remembers how many bytes each read asked for."""

    def __init__(self, files: dict[str, str]) -> None:
        super().__init__(files)
        self.asked: list[int] = []

    def read_file(self, path: str) -> io.BytesIO:
        stream = super().read_file(path)
        read = stream.read
        stream.read = lambda size=-1: self.asked.append(size) or read(size)  # type: ignore[method-assign]
        return stream


@pytest.mark.hostile
def test_a_huge_cypress_file_is_refused_after_reading_one_byte_past_the_limit() -> None:
    cypress = BoundedCypress({"//cp/offsets/3": REAL_OFFSETS + "\n" + "x" * MAX_FILE_BYTES})

    with pytest.raises(CheckpointError, match=rf"yt:///cp/offsets/3: larger than {MAX_FILE_BYTES} bytes"):
        read_checkpoint("yt:///cp", files=CypressFiles(cypress, "//cp"))
    assert cypress.asked == [MAX_FILE_BYTES + 1]


def test_other_sources_offsets_are_kept_as_none_and_a_damaged_yt_offset_is_an_error() -> None:
    other = parse_offsets(REAL_OFFSETS + '\n{"topic": {"0": 5}}\n5\n{"path": "x"}', 2, "cp/offsets/2")

    assert other.sources[1:] == (None, None, None)
    with pytest.raises(CheckpointError, match=r"cp/offsets/2: line 5: not a yt queue offset: partition 0: last read"):
        parse_offsets(REAL_OFFSETS + '\n-\n{"cluster": "c", "path": "//q", "partitions": {"0": "1"}}', 2,
                      "cp/offsets/2")

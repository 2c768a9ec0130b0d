"""Claims across config files (issue 32): two opsd processes, each with its own config file, never run queries on one
checkpoint location or one consumer (one would move or skip the other's rows). One config is checked when it loads
(`models.OpsdConfig`); across files, each pipeline of `opsd run` claims what it owns for as long as it runs:

- its checkpoint location (local, `file://`, or `yt:///` on the embedded cluster): the lock file `LOCK_NAME` inside
  it;
- its consumer on the embedded cluster: a lock file under `<cluster root>/CLAIMS_FOLDER`, named by the consumer.

A claim is an exclusive `flock` on the file, which the kernel releases when the process ends however it ends, so a
stale claim never blocks; the file names the owner (config file, pipeline, pid, host). A claim held by another
process is refused naming both pipelines and both config files. What the file says of its owner is read as
untrusted text (a few known keys, short strings, shown escaped). Checkpoints in Cypress and consumers on YTsaurus
are not claimed (no lock opsd could hold for its lifetime there): the config's own check covers them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from opsd.config.models import OpsdConfig, checkpoint_key, consumer_key
from opsd.telemetry.terminal import printable
from streaming_core.checkpoint import LocalFiles, checkpoint_files
from streaming_core.cluster import resolve_uri
from streaming_core.options import CONSUMER_PATH

#: The lock file inside a claimed checkpoint location (Spark reads only its own files and folders there).
LOCK_NAME = "opsd.lock"
#: The folder under the embedded cluster's root that holds the consumers' claims.
CLAIMS_FOLDER = ".opsd-claims"
# What is read of another owner's lock file: its few keys, each at most this long.
_OWNER_KEYS = ("pipeline", "config", "pid", "host")
_MAX_OWNER_FIELD = 256


@dataclass(frozen=True)
class Claim:
    """What one pipeline claims: a checkpoint location or a consumer, and the lock file that holds the claim."""

    pipeline: str
    kind: str
    what: str
    lock: Path


def claims(config: OpsdConfig) -> list[Claim]:
    """The claims of the config's pipelines (watched queries claim nothing: they are another process's)."""
    cluster = resolve_uri(config.cluster)
    found = []
    for pipeline in config.pipelines:
        if pipeline.checkpoint_location:
            # Where the files are, without connecting: a Cypress location is not claimed.
            files = checkpoint_files(pipeline.checkpoint_location, cluster, yt_client=lambda uri: None)
            if isinstance(files, LocalFiles):
                found.append(Claim(pipeline.name, "checkpoint location", checkpoint_key(pipeline.checkpoint_location),
                                   files.root / LOCK_NAME))
        consumer = pipeline.source.options.get(CONSUMER_PATH) if pipeline.source.format == "yt" else None
        if consumer and cluster.startswith("local://"):
            digest = hashlib.sha256(consumer_key(consumer).encode()).hexdigest()[:32]
            found.append(Claim(pipeline.name, "consumer", consumer_key(consumer),
                               Path(cluster.removeprefix("local://")) / CLAIMS_FOLDER / f"consumer-{digest}.lock"))
    return found


@contextlib.contextmanager
def claimed(config: OpsdConfig, config_path: str | Path) -> Iterator[list[Claim]]:
    """Hold every claim of `config` while inside; a claim another process holds raises `ClaimError` naming every one
    refused (nothing is held then)."""
    owner = {"config": str(Path(config_path).resolve()), "pid": os.getpid(), "host": socket.gethostname()}
    wanted = claims(config)
    with contextlib.ExitStack() as held:
        problems = []
        for claim in wanted:
            other = _take(claim, {**owner, "pipeline": claim.pipeline}, held)
            if other is not None:
                problems.append(f"pipeline {claim.pipeline!r} of {owner['config']} and {other} share the {claim.kind} "
                                f"{claim.what}: each query needs its own (one would move or skip the other's rows)")
        if problems:
            raise ClaimError(Path(config_path), problems)
        yield wanted


class ClaimError(ValueError):
    """Claims held by another opsd; one line per claim refused."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path, self.problems = path, problems
        super().__init__(f"opsd config {path}: " + "; ".join(problems))


def _take(claim: Claim, owner: dict[str, object], held: contextlib.ExitStack) -> str | None:
    """Lock `claim`'s file and write `owner` into it (kept locked by `held`); None, or who holds it instead."""
    claim.lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(claim.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            os.close(fd)
            raise
        other = _owner(fd)
        os.close(fd)
        return other
    held.callback(os.close, fd)
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(owner).encode())
    return None


def _owner(fd: int) -> str:
    """Who holds a lock, from its file (untrusted: known keys only, short, escaped)."""
    try:
        document = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
    except (OSError, ValueError):
        document = None
    if not isinstance(document, dict):
        return "another opsd (its lock file does not say which)"
    fields = {key: printable(str(document.get(key, "?"))[:_MAX_OWNER_FIELD]) for key in _OWNER_KEYS}
    return f"pipeline {fields['pipeline']!r} of {fields['config']} (pid {fields['pid']} on {fields['host']})"

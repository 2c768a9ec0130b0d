"""`opsd tuning set`: write a pipeline's live tuning values (`max_rows_per_partition`, `max_bytes_per_partition`,
`dyn_batch_size`) into the tuning documents its source and sink read at their next batch, as the auto-tuner does
(`streaming_core.tuning`).

A pipeline is named as in `opsd desync` (`QUERY --config FILE`); its documents are the config's
(`PipelineConfig.source_tuning_path`, `sink_tuning_path`). With `autotune.mode: apply` the auto-tuner may change
the value again at its next decision, within its bounds.
"""

from __future__ import annotations

import argparse

from opsd.cli.common import CliError
from opsd.config.load import ConfigError, load_config
from opsd.telemetry.terminal import Shown
from streaming_core.cluster import connect
from streaming_core.options import MAX_BYTES_PER_PARTITION, parse_byte_size
from streaming_core.tuning import write_tuning


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    tuning = subparsers.add_parser("tuning", help="set a pipeline's live tuning values")
    commands = tuning.add_subparsers(dest="tuning_command", required=True, metavar="COMMAND")
    set_ = commands.add_parser("set", parents=[common],
                               help="write values into the tuning documents a pipeline reads at its next batch")
    set_.add_argument("query", help="a pipeline name of --config")
    set_.add_argument("--config", required=True, help="the opsd config file that names QUERY")
    set_.add_argument("--max-rows-per-partition", type=int, metavar="N",
                      help="the source's rows per partition and batch")
    set_.add_argument("--max-bytes-per-partition", metavar="SIZE",
                      help="the source's bytes (data weight) per partition and batch: a number or 16MiB, 1g ...")
    set_.add_argument("--dyn-batch-size", type=int, metavar="N", help="the yt sink's rows per insert call")
    set_.set_defaults(handler=set_tuning)


def set_tuning(args: argparse.Namespace) -> int:
    if args.max_rows_per_partition is None and args.max_bytes_per_partition is None and args.dyn_batch_size is None:
        raise CliError("give a value to set: --max-rows-per-partition N, --max-bytes-per-partition SIZE and/or "
                       "--dyn-batch-size N")
    try:
        max_bytes = None if args.max_bytes_per_partition is None else \
            parse_byte_size(MAX_BYTES_PER_PARTITION, args.max_bytes_per_partition)
    except ValueError as e:
        raise CliError(f"--max-bytes-per-partition: {e}") from None
    try:
        config = load_config(args.config)
    except ConfigError as e:
        raise CliError(str(e)) from None
    pipeline = next((p for p in config.pipelines if p.name == args.query), None)
    if pipeline is None:
        raise CliError(f"{args.config}: no pipeline named {args.query!r}")
    writes = {"--max-rows-per-partition": (pipeline.source_tuning_path(), "max_rows_per_partition",
                                           args.max_rows_per_partition, "a yt source"),
              "--max-bytes-per-partition": (pipeline.source_tuning_path(), "max_bytes_per_partition", max_bytes,
                                            "a yt source"),
              "--dyn-batch-size": (pipeline.sink_tuning_path(), "dyn_batch_size", args.dyn_batch_size, "a yt sink")}
    shown = Shown()
    with connect(args.cluster or config.cluster) as cluster:
        for flag, (path, key, value, needs) in writes.items():
            if value is None:
                continue
            if value < 1:
                raise CliError(f"{flag} {value}: a number of rows, 1 or more")
            if path is None:
                raise CliError(f"{flag}: pipeline {args.query!r} has no tuning document for it (it needs {needs})")
            try:
                write_tuning(cluster, path, **{key: value}, reason="opsd tuning set")
            except ValueError as e:
                raise CliError(f"{e}: left as it is (neither the source nor the sink uses it); fix or remove it, "
                               "then set the value again") from None
            print(shown.line(f"{args.query}: {key} {value} in {path} (in force at its next batch)"))
    return 0

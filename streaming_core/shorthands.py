"""SPYT's shorthands on PySpark's reader and writer, so that SPYT users' code runs unchanged.

SPYT's Python package adds these methods to `DataFrameReader` / `DataFrameWriter`; `install_shorthands()`
(called by `streaming_core.register` and so by `spark_session()`) adds the same, with the same signatures,
each mapped to the `yt` format and its options (`streaming_core.options`):

| shorthand | is |
| --- | --- |
| `spark.read.yt(*paths)` | `spark.read.format("yt").load(path)`, the union by name of several paths |
| `df.write.yt(path, mode=None)` | `df.write.format("yt").save(path)` with the writer's save mode (option `save_mode`) |
| `df.write.sorted_by(*cols, unique_keys=False)` | options `sort_columns` (JSON list) and `unique_keys` |
| `df.write.optimize_for(mode)` | option `optimize_for` (`scan` or `lookup`) |

Notes
-----
Spark refuses the save modes "errorifexists" (its default) and "ignore" for Python data sources before
the source sees the write, so `yt()` reads the writer's mode from the JVM, passes it as `save_mode` and
asks Spark for "append" (or "overwrite"). Classic (py4j) sessions only.
"""

from __future__ import annotations

import json
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, DataFrameWriter

from .options import FORMAT, OPTIMIZE_FOR, SAVE_MODE, SORT_COLUMNS, UNIQUE_KEYS


def read_yt(self: DataFrameReader, *paths: str) -> DataFrame:
    """`spark.read.yt(path, ...)`: each table read with the reader's options; several are unioned by name."""
    if not paths:
        raise ValueError("spark.read.yt() needs at least one path")
    return reduce(DataFrame.unionByName, (self.format(FORMAT).load(path) for path in paths))


def write_yt(self: DataFrameWriter, path: str, mode: str | None = None) -> None:
    """`df.write.yt(path, mode=None)`: a batch write with Spark's save modes (see `save_modes`)."""
    if mode is not None:
        self.mode(mode)
    save_mode = current_save_mode(self)
    spark_mode = "overwrite" if save_mode == "overwrite" else "append"
    self.format(FORMAT).option(SAVE_MODE, save_mode).mode(spark_mode).save(path)


def current_save_mode(writer: DataFrameWriter) -> str:
    """The save mode set on `writer` (`errorifexists` unless `mode(...)` was called), read from the JVM."""
    cls = writer._jwrite.getClass()
    while cls is not None:
        for field in cls.getDeclaredFields():
            if field.getName() == "curmode":
                field.setAccessible(True)
                return str(field.get(writer._jwrite).name()).lower()
        cls = cls.getSuperclass()
    raise RuntimeError("cannot read the save mode of this DataFrameWriter (needs a classic PySpark session)")


def sorted_by(self: DataFrameWriter, *cols: str, **kwargs: Any) -> DataFrameWriter:
    """`df.write.sorted_by("a", "b", unique_keys=False)`: a new table's key columns, ascending."""
    return self.option(SORT_COLUMNS, json.dumps(cols)).option(UNIQUE_KEYS, str(bool(kwargs.get("unique_keys"))))


def optimize_for(self: DataFrameWriter, optimize_mode: str) -> DataFrameWriter:
    """`df.write.optimize_for("scan")`: a new table's `optimize_for` attribute."""
    return self.option(OPTIMIZE_FOR, optimize_mode)


def install_shorthands() -> None:
    """Add the shorthands to PySpark's classes (idempotent)."""
    DataFrameReader.yt = read_yt
    DataFrameWriter.yt = write_yt
    DataFrameWriter.sorted_by = sorted_by
    DataFrameWriter.optimize_for = optimize_for

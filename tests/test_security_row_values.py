"""Row values never leave in `/status` failure texts unless asked (issue 32): Spark's, Java's, Python's and Arrow's
messages quote the value that failed; `/status` serves them as `<row value>` unless `http.status_row_values` is on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
import requests

from opsd.config.models import HttpSettings
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.row_values import ROW_VALUE, without_row_values, without_row_values_in

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]

SECRET = "Secret-Row-Value-7"

# Each form as its message template writes it (Spark 4.2's error-conditions.json, the JDK, CPython, Arrow).
QUOTED = {
    "cast-invalid-input": f"[CAST_INVALID_INPUT] The value '{SECRET}' of the type \"STRING\" cannot be cast to "
                          "\"INT\" because it is malformed. SQLSTATE: 22018",
    "cast-overflow": "[CAST_OVERFLOW] The value 98765432109876L of the type \"BIGINT\" cannot be cast to \"INT\"",
    "conversion": f"[CONVERSION_INVALID_INPUT] The value '{SECRET}' (BASE64) cannot be converted to BINARY",
    "numeric-range": f"[NUMERIC_OUT_OF_SUPPORTED_RANGE] The value '{SECRET}' cannot be interpreted as a numeric",
    "parse-time": f"[CANNOT_PARSE_TIME] The input string '{SECRET}' cannot be parsed to a TIME value",
    "check-constraint": f"[CHECK_CONSTRAINT_VIOLATION] CHECK constraint c violated by row with values:\n - x : "
                        f"{SECRET}\n SQLSTATE: 23001",
    "row-to-json": f"[FAILED_ROW_TO_JSON] Failed to convert the row value '{SECRET}' of the class class j.l.String",
    "utf8": f"[INVALID_UTF8_STRING] Invalid UTF8 byte sequence found in string: {SECRET}.",
    "partition": f"[INVALID_PARTITION_VALUE] Failed to cast value '{SECRET}' to data type \"INT\" for partition",
    "raise-error": f"[USER_RAISED_EXCEPTION] order {SECRET} is broken SQLSTATE: P0001",
    "number-format": f'java.lang.NumberFormatException: For input string: "{SECRET}"',
    "java-time": f"java.time.format.DateTimeParseException: Text '{SECRET}' could not be parsed at index 0",
    "python-int": f"ValueError: invalid literal for int() with base 10: '{SECRET}'",
    "python-float": f"ValueError: could not convert string to float: '{SECRET}'",
    "python-row": f"ValueError: cannot write Row(id=1, name='{SECRET} (x)', inner=Row(a=2)) to the sink",
    "arrow": f"pyarrow.lib.ArrowInvalid: Could not convert '{SECRET}' with type str: tried to convert to int64",
}


@pytest.mark.parametrize("form", QUOTED)
def test_every_quoted_form_loses_its_value_and_keeps_what_failed(form: str) -> None:
    text = QUOTED[form]
    masked = without_row_values(text)
    assert SECRET not in masked and "98765432109876" not in masked and ROW_VALUE in masked
    assert text.startswith(masked.split(ROW_VALUE)[0]), "what failed is kept"


def test_text_without_a_row_value_is_left_as_it_was() -> None:
    text = "streaming_core.cluster.errors.NoSuchPathError: //home/q: no such node SQLSTATE: 38000"
    assert without_row_values(text) == text
    assert without_row_values_in({"q": [text, 3, None]}) == {"q": [text, 3, None]}


def test_the_switch_is_off_by_default() -> None:
    assert HttpSettings().status_row_values is False


def failure_texts(spark) -> list[str]:
    """Real failure texts of Spark quoting a row's value: a SQL cast (ANSI), a Python UDF, a foreachBatch that names
    the batch's first Row. The value is made from the data, never a literal of the plan (a streaming failure's text
    shows its plan)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    frame = spark.createDataFrame([(SECRET,)], "v string")
    runs = [lambda: frame.select(F.col("v").cast("int")).collect(),
            lambda: frame.select(F.udf(int, IntegerType())("v")).collect()]

    def batch(df, batch_id: int) -> None:
        if not df.isEmpty():
            raise ValueError(f"cannot write {df.first()}")

    def stream() -> None:
        value = F.concat(F.lit(SECRET[:-1]), (F.col("value") + int(SECRET[-1])).cast("string"))  # the first row's
        rows = spark.readStream.format("rate").option("rowsPerSecond", 5).load().withColumn("v", value)
        query = rows.writeStream.foreachBatch(batch).trigger(processingTime="0.2 seconds").start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()

    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    texts = []
    try:
        for run in [*runs, stream]:
            with pytest.raises(Exception) as error:  # Spark's class differs by the way it failed
                run()
            texts.append(str(error.value))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    return texts


@pytest.fixture
def served(spark) -> Iterator[tuple[list[str], Callable[[bool], str]]]:
    texts = failure_texts(spark)
    servers = []

    def status(row_values: bool) -> str:
        server = OpsHttpServer(lambda: b"", status=lambda: {"queries": {"q": {"exception": texts[0], "error": texts[1],
                                                                              "permanent_failure": texts[2]}}},
                               row_values=row_values)
        server.start()
        servers.append(server)
        return requests.get(server.url + "/status", timeout=10).text
    yield texts, status
    for server in servers:
        server.stop()


def test_real_spark_failure_texts_reach_status_without_the_row_value_unless_asked(served) -> None:
    texts, status = served
    assert all(SECRET in text for text in texts), texts  # Spark quotes it: the test would prove nothing otherwise
    hidden = json.loads(status(row_values=False))["queries"]["q"]
    assert SECRET not in json.dumps(hidden)
    assert "CAST_INVALID_INPUT" in hidden["exception"] and ROW_VALUE in hidden["exception"]
    assert "invalid literal for int()" in hidden["error"] and "Row(" in hidden["permanent_failure"]
    assert SECRET in status(row_values=True)

"""The pipeline builder: a failing SQL transform leaves no temporary view behind."""

from __future__ import annotations

import pytest

from opsd.config.models import PipelineConfig
from opsd.runtime.pipeline import SOURCE_VIEW, transform


def test_a_sql_transform_that_fails_drops_its_temporary_view(spark) -> None:
    pipeline = PipelineConfig.model_validate({
        "name": "broken", "source": {"format": "rate"}, "sink": {"format": "console"},
        "transform": {"sql": "SELECT no_such_column FROM source"}})
    df = spark.readStream.format("rate").load()

    with pytest.raises(Exception, match="no_such_column"):
        transform(spark, df, pipeline)

    assert not spark.catalog.tableExists(SOURCE_VIEW)

"""The OOM-risk check: predict the next micro-batch's peak memory per pool from the peaks Spark measured."""

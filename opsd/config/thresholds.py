"""The levels opsd judges by, each defined once: the alert thresholds, the OOM risk target, and the confidence and
memory of the OOM model that judges the risk.

The alert rules (`helm/opsd/files/alerts.yaml`, plain Prometheus YAML) are checked against `ALERT_THRESHOLDS` by
`tests/test_thresholds.py`; the dashboards' red lines (`grafana/build.py`) and the doctor read these names; the config
keys that aim at the OOM risk target take it as their default, and the OOM model's settings
(`opsd.checks.oom.evaluate.ModelSettings`) and their config keys take theirs from here.

OOM risk (`opsd_oom_risk`: the upper bound of the next batch's predicted peak over the pool's limit, 1.0 = out of
memory) is judged at two levels, and they are two different things:

- `OOM_RISK_TARGET`: the risk a planned batch is sized to stay under, with room for the model's error. The safe
  `max_rows_per_partition` keeps every pool under it and opsd warns above it (`checks.oom_risk_target`); the
  auto-tuner cuts its cap at it (`autotune.risk_threshold`).
- `OOM_RISK_HIGH`: the risk at which a person must act: the `OpsdOomRiskHigh` alert, the doctor's finding, the
  dashboards' red line. It sits above the target so that what the tuner corrects by itself pages no one.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The OOM risk a planned batch is sized to stay under (default of `checks.oom_risk_target` and
#: `autotune.risk_threshold`).
OOM_RISK_TARGET = 0.7
#: The OOM risk from which the next batch needs action (`OpsdOomRiskHigh`, the doctor, the dashboards).
OOM_RISK_HIGH = 0.9
#: The one-sided confidence of the predicted peak's upper bound that the OOM risk is judged by
#: (`checks.oom_confidence`).
OOM_CONFIDENCE = 0.99
#: The OOM model's memory: a batch this many batches old weighs half as much as the newest
#: (`checks.oom_half_life_batches`).
OOM_HALF_LIFE_BATCHES = 20.0
#: The age of the oldest unread row from which a query is too far behind (`OpsdLagHigh`).
LAG_HIGH_SECONDS = 900
#: A backlog that needs longer than this to drain at the current rates (`OpsdTimeToDrainLong`) ...
TIME_TO_DRAIN_LONG_SECONDS = 3600
#: ... of a query that is behind by more than this (a healthy query's small backlog may never shrink).
TIME_TO_DRAIN_MIN_LAG_SECONDS = 300
#: The 95th percentile micro-batch duration that is too slow (`OpsdHighBatchDuration`).
BATCH_DURATION_HIGH_SECONDS = 120
#: The event-time watermark's delay behind processing time that is too long (`OpsdWatermarkDelayHigh`).
WATERMARK_DELAY_HIGH_SECONDS = 900
#: The share of a check's runs that fail from which its results are stale (`OpsdChecksFailing`).
CHECK_ERRORS_HIGH_SHARE = 0.5
#: The forecast time until the queue's trimming deletes rows a query has not read under which a person must act
#: (`OpsdRowsTrimmedSoon`, the doctor, the dashboards): an hour to raise the retention, register the consumer as vital
#: or speed the query up.
TRIM_ETA_SHORT_SECONDS = 3600
#: How long a vital consumer may stand still while rows wait for it (holding back the queue's trimming for every
#: reader) before it is a finding (`OpsdVitalConsumerStalled`, the doctor, the dashboards).
VITAL_CONSUMER_STALLED_SECONDS = 1800
#: How long after a zombie attempt of a producer-mode query was fenced off its producer reads `zombie_fenced` (the
#: window `OpsdProducerZombieFenced` counts fences over, the doctor's finding).
PRODUCER_FENCE_RECENT_SECONDS = 900
#: Batches a producer session may stand past the query's last completed batch (the batch running, and one more while
#: its progress event is on its way) before its query's new rows are taken as skipped (`sessions_ahead`).
PRODUCER_AHEAD_BATCHES = 2

#: Every alert that compares a metric with a level: the levels its expression compares with.
ALERT_THRESHOLDS: Mapping[str, tuple[float, ...]] = {
    "OpsdOomRiskHigh": (OOM_RISK_HIGH,),
    "OpsdLagHigh": (LAG_HIGH_SECONDS,),
    "OpsdTimeToDrainLong": (TIME_TO_DRAIN_LONG_SECONDS, TIME_TO_DRAIN_MIN_LAG_SECONDS),
    "OpsdHighBatchDuration": (BATCH_DURATION_HIGH_SECONDS,),
    "OpsdWatermarkDelayHigh": (WATERMARK_DELAY_HIGH_SECONDS,),
    "OpsdChecksFailing": (CHECK_ERRORS_HIGH_SHARE,),
    "OpsdRowsTrimmedSoon": (TRIM_ETA_SHORT_SECONDS,),
    "OpsdVitalConsumerStalled": (VITAL_CONSUMER_STALLED_SECONDS,),
}

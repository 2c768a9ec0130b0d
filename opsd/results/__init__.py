"""What the checks read and find, as the frozen types the collector, the checks, the status store and the doctor
hand each other: the positions reading (`positions`), each check's results in a module named after it (`desync`,
`lag`, `queue_agent`, `trim`, `vital`, `oom`, `autotune`, `history`, `cycle`) and the immutable values inside them
(`values`).

Each type's `to_json` gives its entry of the `/status` document (values may still be floats, enums, nested types:
`opsd.observe.status.jsonable` finishes them), so JSON is made at the edge only. Pure: no cluster, no Spark, no
clock.
"""

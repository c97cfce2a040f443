"""Jobs that watch: expectations on a result, and what changed since an earlier run.

``expect`` says what a good result looks like (a JSON Schema and shorthands); a result that
breaks it is a ``data_quality`` failure. ``monitor`` says what to compare with the baseline
run (tracked results matched by key, a masked screenshot); ``diff`` computes ``changes``.
Nothing here knows jobs, schedules or AWS: the worker and the API call it with plain values.
"""

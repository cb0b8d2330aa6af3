"""Serving, independent of the model served.

- :mod:`.records`: records out of KServe V1 and V2 requests, checked against a schema, with
  errors that name the field (the predictor's 400s).
- :mod:`.canary`: the canary analysis -- replay to stable and canary, figures, decision rule.
- :mod:`.registry`: the embedded platform's model registry (what is in production, since when).
- :mod:`.local_services`: long-lived processes of an embedded run (model servers), stopped with
  the run.
"""

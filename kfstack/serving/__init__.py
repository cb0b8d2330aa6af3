"""Serving, independent of the model served.

- :mod:`.records`: records out of KServe V1 and V2 requests, checked against a schema, with
  errors that name the field (the predictor's 400s).
"""

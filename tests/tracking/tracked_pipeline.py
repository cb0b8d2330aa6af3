"""A small pipeline for the tracking tests: a step with a Metrics output, a report file and a
JSON decision (as the deployment step's canary analysis is), and a step whose own code logs to
MLflow without configuration. ``$TRACKED_STEP_SLEEP`` holds the first step a while (a test stops
the server meanwhile).

(No ``from __future__ import annotations``: kfp reads the components' annotations as types.)
"""

from kfp import dsl


@dsl.component(base_image="python:3.11")
def report_rows(rows: int, report: dsl.Output[dsl.Markdown], figures: dsl.Output[dsl.Metrics]) -> str:
    import json
    import os
    import time

    time.sleep(float(os.environ.get("TRACKED_STEP_SLEEP", "0")))
    figures.log_metric("rows", rows)
    with open(report.path, "w") as f:
        f.write(f"# {rows} rows\n")
    return json.dumps({"decision": "promote", "canary": {"error_rate": 0.01, "requests": 200}})


@dsl.component(base_image="python:3.11")
def team_logs(decision: str, own_logging: bool) -> float:
    if own_logging:
        import mlflow

        mlflow.log_metric("team_metric", 0.5)  # joins the task's run: MLFLOW_RUN_ID
    return 0.5


@dsl.pipeline(name="tracked-steps")
def pipeline(rows: int = 3, own_logging: bool = True) -> float:
    made = report_rows(rows=rows)
    return team_logs(decision=made.outputs["Output"], own_logging=own_logging).output

"""A one-step pipeline for the kfp adapter's tests: the step writes what an embedded run tells its
tasks (the run's environment) to ``<out_dir>/environment.json``, then fails when ``fail``.

(No ``from __future__ import annotations``: kfp reads the components' annotations as types.)
"""

from kfp import dsl


@dsl.component(base_image="python:3.11")
def record(out_dir: str, fail: bool) -> str:
    import json
    import os

    told = ("KFSTACK_RUN_DIR", "KFSTACK_REGISTRY_DIR", "KFSTACK_PIPELINE_VERSION", "KFSTACK_RUN_OWNER_PID")
    with open(os.path.join(out_dir, "environment.json"), "w") as f:
        json.dump({name: os.environ.get(name) for name in (*told, "TMPDIR")}, f)
    if fail:
        raise ValueError("asked to fail")
    return "recorded"


@dsl.pipeline(name="adapter-run")
def pipeline(out_dir: str, fail: bool = False) -> str:
    return record(out_dir=out_dir, fail=fail).output

"""A small pipeline for the step cache's tests. Each step leaves a file in the folder
``$COUNT_DIR`` names every time it executes, so a test sees which steps ran and which the cache
answered (an environment variable, not an argument: a folder an argument names is part of the
step's key, and this one changes with every step that runs); ``notes`` may name a file, whose
content is then part of what ``consume`` depends on. ``consume``'s Metrics
output is metadata only, without a file, as the reports of kfstack's steps are.

(No ``from __future__ import annotations``: kfp reads the components' annotations as types.)
"""

from kfp import dsl


@dsl.component(base_image="python:3.11")
def produce(size: int, data: dsl.Output[dsl.Dataset]):
    import os
    import uuid

    open(os.path.join(os.environ["COUNT_DIR"], f"produce-{uuid.uuid4().hex}"), "w").close()
    with open(data.path, "w") as f:
        f.write("x" * size)


@dsl.component(base_image="python:3.11")
def consume(
    scale: float, notes: str, data: dsl.Input[dsl.Dataset], figures: dsl.Output[dsl.Metrics]
) -> float:
    import os
    import uuid

    open(os.path.join(os.environ["COUNT_DIR"], f"consume-{uuid.uuid4().hex}"), "w").close()
    with open(data.path) as f:
        size = len(f.read())
    figures.log_metric("size", size)  # metadata only: the artifact has no file
    return size * scale


@dsl.component(base_image="python:3.11")
def announce():
    import os
    import uuid

    open(os.path.join(os.environ["COUNT_DIR"], f"announce-{uuid.uuid4().hex}"), "w").close()


@dsl.pipeline(name="cached-steps")
def pipeline(size: int = 3, scale: float = 1.0, notes: str = "") -> float:
    made = produce(size=size)
    used = consume(scale=scale, notes=notes, data=made.outputs["data"])
    announce().after(used).set_caching_options(False)
    return used.outputs["Output"]

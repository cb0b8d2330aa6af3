"""A small pipeline for the step cache's tests. Each step leaves a file in ``count_dir`` every
time it executes, so a test sees which steps ran and which the cache answered; ``notes`` may
name a file, whose content is then part of what ``consume`` depends on. ``consume``'s Metrics
output is metadata only, without a file, as the reports of kfstack's steps are.

(No ``from __future__ import annotations``: kfp reads the components' annotations as types.)
"""

from kfp import dsl


@dsl.component(base_image="python:3.11")
def produce(count_dir: str, size: int, data: dsl.Output[dsl.Dataset]):
    import os
    import uuid

    open(os.path.join(count_dir, f"produce-{uuid.uuid4().hex}"), "w").close()
    with open(data.path, "w") as f:
        f.write("x" * size)


@dsl.component(base_image="python:3.11")
def consume(
    count_dir: str, scale: float, notes: str, data: dsl.Input[dsl.Dataset], figures: dsl.Output[dsl.Metrics]
) -> float:
    import os
    import uuid

    open(os.path.join(count_dir, f"consume-{uuid.uuid4().hex}"), "w").close()
    with open(data.path) as f:
        size = len(f.read())
    figures.log_metric("size", size)  # metadata only: the artifact has no file
    return size * scale


@dsl.component(base_image="python:3.11")
def announce(count_dir: str):
    import os
    import uuid

    open(os.path.join(count_dir, f"announce-{uuid.uuid4().hex}"), "w").close()


@dsl.pipeline(name="cached-steps")
def pipeline(count_dir: str, size: int = 3, scale: float = 1.0, notes: str = "") -> float:
    made = produce(count_dir=count_dir, size=size)
    used = consume(count_dir=count_dir, scale=scale, notes=notes, data=made.outputs["data"])
    announce(count_dir=count_dir).after(used).set_caching_options(False)
    return used.outputs["Output"]

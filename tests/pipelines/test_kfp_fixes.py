"""The fixed kfp method behaves as kfp's own: same check, same message, no source read.

(No ``from __future__ import annotations``: kfp reads the components' annotations as types.)
"""

import inspect

import pytest
from kfp import dsl
from kfp.dsl import pipeline_task

from kfstack.pipelines import kfp_fixes, wiring


@dsl.component(base_image="python:3.11")
def _step() -> None:
    pass


@dsl.pipeline(name="inner")
def _inner() -> None:
    _step()


def _refusal(method) -> str:
    """The message of setting a resource on a pipeline used as a component, with ``method``."""
    saved = pipeline_task.PipelineTask._ensure_container_spec_exists
    pipeline_task.PipelineTask._ensure_container_spec_exists = method
    try:
        with pytest.raises(ValueError) as refused:

            @dsl.pipeline(name="outer")
            def outer() -> None:
                _inner().set_cpu_limit("1")

    finally:
        pipeline_task.PipelineTask._ensure_container_spec_exists = saved
    return str(refused.value)


def test_the_fixed_check_refuses_as_kfps_own_does():
    assert wiring.RUN_ID  # defining a step with kfstack's wiring installed the fix
    assert pipeline_task.PipelineTask._ensure_container_spec_exists is kfp_fixes._ensure_container_spec_exists
    ours = _refusal(kfp_fixes._ensure_container_spec_exists)
    assert ours == _refusal(kfp_fixes.original())
    assert ours.startswith("set_cpu_limit can only be used on single-step components")


def test_a_step_still_takes_its_resources_without_reading_the_stack(monkeypatch):
    def no_stack(*args, **kwargs):
        raise AssertionError("inspect.stack() was called")

    monkeypatch.setattr(inspect, "stack", no_stack)

    @dsl.pipeline(name="sized")
    def sized() -> None:
        _step().set_cpu_limit("2").set_memory_request("1G")

    assert sized.pipeline_spec is not None

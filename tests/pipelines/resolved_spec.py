"""A compiled pipeline as what its run would do: each task with its component, display name,
upstream tasks and the value each input resolves to, and the pod settings KFP's driver applies.

Compiled specs written in different ways -- a pipeline's root parameters or constants, an exit
handler's channels, a value passed on or a component's own default -- resolve to the same view
when the run would be the same. How a value reaches a task (root inputs, task inputs, component
code) is left out on purpose: those change when a pipeline is declared another way; what each task
does with its values must not.
"""

from __future__ import annotations

import copy
import re
import tempfile
from collections.abc import Mapping
from typing import Any

import yaml

PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")
CHANNEL_PREFIX = "pipelinechannel--"


def compile_pipeline(pipeline: Any, arguments: Mapping[str, Any] | None = None) -> tuple[dict, dict]:
    """``pipeline`` compiled by KFP's compiler: its pipeline spec and its platform spec."""
    from kfp import compiler

    with tempfile.NamedTemporaryFile(suffix=".yaml") as out:
        compiler.Compiler().compile(pipeline, out.name, pipeline_parameters=dict(arguments or {}))
        with open(out.name) as compiled:
            documents = [d for d in yaml.safe_load_all(compiled) if d]
    spec = next(d for d in documents if "root" in d)
    platform = next((d for d in documents if "platforms" in d), {"platforms": {}})
    return spec, platform


def _substitute(value: Any, inputs: Mapping[str, Any]) -> Any:
    """``value`` with every ``{{$.inputs.parameters['name']}}`` replaced by ``inputs[name]``: a
    whole-string placeholder by the value itself, one inside a string by its text."""
    if isinstance(value, str):
        whole = PLACEHOLDER.fullmatch(value)
        if whole:
            return inputs[whole.group(1)]
        return PLACEHOLDER.sub(lambda m: _text(inputs[m.group(1)]), value)
    if isinstance(value, list):
        return [_substitute(item, inputs) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, inputs) for key, item in value.items()}
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _resolve_inputs(task: dict, scope: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    resolved: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    for name, given in task.get("inputs", {}).get("parameters", {}).items():
        if "componentInputParameter" in given:
            resolved[name] = scope[given["componentInputParameter"]]
        elif "taskOutputParameter" in given:
            output = given["taskOutputParameter"]
            resolved[name] = f"<{prefix}{output['producerTask']}.{output['outputParameterKey']}>"
        elif "taskFinalStatus" in given:
            resolved[name] = "<final status>"
        else:
            constants[name] = given["runtimeValue"]["constant"]
    for name, constant in constants.items():
        resolved[name] = _substitute(constant, resolved)
    for name, given in task.get("inputs", {}).get("artifacts", {}).items():
        if "taskOutputArtifact" in given:
            output = given["taskOutputArtifact"]
            resolved[name] = f"<{prefix}{output['producerTask']}.{output['outputArtifactKey']}>"
        else:
            resolved[name] = scope[given["componentInputArtifact"]]
    return resolved


CONDITION_INPUT = re.compile(r"inputs\.parameter_values\['([^']+)'\]")
UPSTREAM = re.compile(r"<[^<>]+\.[^<>]+>")


def _condition(condition: str, inputs: Mapping[str, Any]) -> str:
    """A group's condition with each input it reads replaced by what that input resolves to (an
    upstream output as ``<task.output>``)."""
    return CONDITION_INPUT.sub(lambda m: _text(inputs[m.group(1)]), condition)


def _platform(executor: dict, inputs: Mapping[str, Any]) -> dict:
    """The executor's Kubernetes settings with every parameter reference resolved."""

    def resolve(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"componentInputParameter"}:
                return inputs[value["componentInputParameter"]]
            if set(value) == {"runtimeValue"}:
                return value["runtimeValue"]["constant"]
            found = {key: resolve(item) for key, item in value.items()}
            # kfp-kubernetes also writes a constant Secret name to the field it deprecated
            # (secretName beside secretNameParameter): the same Secret either way.
            if "secretName" in found and found["secretName"] == found.get("secretNameParameter"):
                del found["secretName"]
            return found
        if isinstance(value, list):
            return [resolve(item) for item in value]
        return value

    return resolve(copy.deepcopy(executor))


def resolved_tasks(spec: dict, platform: dict) -> dict[str, dict[str, Any]]:
    """Display name -> the task as its run would see it: ``component`` (its name in the spec),
    ``after`` (the display names of its upstream tasks), ``inputs`` (every input of its
    component: what the task passes, else the component's default), ``pod`` (KFP's Kubernetes
    settings of its executor), ``exit`` (true for an exit handler's task) and ``when`` (the
    conditions of the groups it runs in, each upstream output by its producer's display name)."""
    executors = (
        platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    )
    root_inputs = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    scope = {name: definition.get("defaultValue") for name, definition in root_inputs.items()}
    found: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}

    def walk(dag: dict, scope: Mapping[str, Any], prefix: str, when: tuple[str, ...]) -> None:
        for task_name, task in dag["tasks"].items():
            component = spec["components"][task["componentRef"]["name"]]
            inputs = _resolve_inputs(task, scope, prefix)
            if "dag" in component:  # an exit handler's (or a condition's) group: its tasks
                condition = task.get("triggerPolicy", {}).get("condition")
                inner = (*when, _condition(condition, inputs)) if condition else when
                walk(component["dag"], inputs, f"{prefix}{task_name}/", inner)
                continue
            defaults = {
                name: definition.get("defaultValue")
                for name, definition in component.get("inputDefinitions", {}).get("parameters", {}).items()
            }
            values = {**defaults, **{k: v for k, v in inputs.items() if not k.startswith(CHANNEL_PREFIX)}}
            display = task["taskInfo"]["name"]
            names[f"{prefix}{task_name}"] = display
            found[display] = {
                "component": task["componentRef"]["name"].removeprefix("comp-"),
                "after": [f"{prefix}{upstream}" for upstream in task.get("dependentTasks", [])],
                "inputs": values,
                "pod": _platform(executors.get(component.get("executorLabel", ""), {}), {**inputs, **scope}),
                "exit": task.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED",
                "when": list(when),
            }

    walk(spec["root"]["dag"], scope, "", ())

    def by_display_name(value: Any) -> Any:
        # An upstream output, named by the producer's task id: named by its display name instead.
        if isinstance(value, str) and value.startswith("<") and value.endswith(">") and "." in value:
            producer, _, key = value[1:-1].rpartition(".")
            return f"<{names.get(producer, producer)}.{key}>"
        if isinstance(value, str):  # a condition: its upstream outputs, by display name
            return UPSTREAM.sub(lambda m: by_display_name(m.group(0)), value)
        if isinstance(value, list):
            return [by_display_name(item) for item in value]
        if isinstance(value, dict):
            return {k: by_display_name(item) for k, item in value.items()}
        return value

    for task in found.values():
        task["inputs"] = by_display_name(task["inputs"])
        task["when"] = by_display_name(task["when"])
        # An upstream group (the exit handler) stands for every task in it.
        after = set()
        for upstream in task["after"]:
            after |= {names[n] for n in names if n == upstream or n.startswith(f"{upstream}/")}
        task["after"] = sorted(after)
    return found

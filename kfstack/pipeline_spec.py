"""Follows a compiled pipeline's own wiring to the tasks that launch cluster work.

The compiled spec is the one source of wiring
(docs/architecture.md#the-compiled-spec-is-the-one-source-of-wiring).

``kfstack render`` and the validate-parameters task need to know what a run creates. Rather than
keep a second copy of the wiring, they walk the compiled pipeline spec (the IR YAML a KFP backend
runs): each task's inputs are resolved from the pipeline parameters and constants the way the
backend would resolve them, nested DAGs (exit handlers, conditions, sub-pipelines) are entered
with their own input scope, and conditions are evaluated on the parameters.

What only the run can know stays a clearly marked :class:`~kfstack.settings.Placeholder`:

- an artifact's URI (the backend picks it): ``{{artifact:<task>/<output>}}``;
- a value an earlier task produces (a tuned learning rate): ``{{output:<task>/<output>}}``.

A condition that depends on such a value cannot be decided: every branch of it is followed, and
each task found there says under which undecided conditions it runs (:attr:`LaunchingTask.when`).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

import yaml

from kfstack.settings import Placeholder

RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
TASK_NAME_PLACEHOLDER = "{{$.pipeline_task_name}}"
_INPUT_REFERENCE = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")


class UndecidedCondition(Exception):
    """A condition reads a value only the run knows."""


# libyaml's loader and dumper where PyYAML was built with it (its wheels are): a compiled
# pipeline is a few hundred KB of YAML, which the pure-Python loader takes a second or more to read.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def read_documents(stream: IO[str]) -> list[dict[str, Any]]:
    """The YAML documents of a compiled pipeline (the pipeline spec, then its platform spec when
    it has one), empty ones left out; as ``yaml.safe_load_all`` reads them."""
    return [document for document in yaml.load_all(stream, Loader=_LOADER) if document]


def write_documents(documents: list[dict[str, Any]], stream: IO[str]) -> None:
    """Writes ``documents`` as ``yaml.safe_dump_all`` does, keys in their order."""
    yaml.dump_all(documents, stream, Dumper=_DUMPER, sort_keys=False)


def artifact_placeholder(task: str, output: str) -> Placeholder:
    return Placeholder(f"{{{{artifact:{task}/{output}}}}}")


def output_placeholder(task: str, output: str) -> Placeholder:
    return Placeholder(f"{{{{output:{task}/{output}}}}}")


@dataclasses.dataclass(frozen=True)
class LaunchingTask:
    """A task of a run whose component is one of the launching components asked for.

    Attributes:
        task: The task's name in its DAG (what ``dsl.PIPELINE_TASK_NAME_PLACEHOLDER`` becomes).
        component: The key its component was asked for by (``launching_tasks``' ``components``).
        arguments: Its inputs by parameter name, outputs as artifact placeholders.
        when: The conditions, undecided from the parameters, under which it runs (empty: it
            runs whenever the run gets this far).
    """

    task: str
    component: str
    arguments: dict[str, Any]
    when: tuple[str, ...] = ()


def executor_identity(image: str, command: Sequence[str], args: Sequence[str]) -> str:
    """What tells one component's executor from another's in a compiled spec: its container's
    image, command and arguments. A lightweight component's command embeds the function's own
    source; a containerized one (``target_image``) has the same command as any other, and its
    function's name in the arguments and its own image. Two components of the same name from
    different packages differ here; the same component, compiled in the same process, always
    matches."""
    return hashlib.sha256(json.dumps([image, list(command), list(args)]).encode()).hexdigest()


def launching_tasks(
    spec: Mapping[str, Any], parameters: Mapping[str, Any], components: Mapping[str, str], run_id: str
) -> list[LaunchingTask]:
    """The tasks of ``components`` a run with ``parameters`` would execute, in DAG order.

    Args:
        spec: The compiled pipeline spec (the first YAML document of a compiled pipeline).
        parameters: Every pipeline parameter's value (defaults filled in).
        components: :func:`executor_identity` of each component to report -> the key to report
            its tasks by.
        run_id: Stands in for the KFP run id.
    """
    walker = _Walker(spec, components, run_id)
    scope = _Scope(parameters=dict(parameters), artifacts={})
    return list(walker.dag(spec["root"]["dag"], scope, when=()))


@dataclasses.dataclass
class _Scope:
    """The inputs a DAG's tasks can refer to (``componentInputParameter/Artifact``)."""

    parameters: dict[str, Any]
    artifacts: dict[str, Any]


class _Walker:
    def __init__(self, spec: Mapping[str, Any], components: Mapping[str, str], run_id: str) -> None:
        self.spec = spec
        self.components = dict(components)
        self.run_id = run_id

    def dag(self, dag: Mapping[str, Any], scope: _Scope, when: tuple[str, ...]) -> Iterator[LaunchingTask]:
        for name in _topological(dag.get("tasks", {})):
            yield from self.task(name, dag["tasks"][name], scope, when)

    def task(
        self, name: str, task: Mapping[str, Any], scope: _Scope, when: tuple[str, ...]
    ) -> Iterator[LaunchingTask]:
        component = self.spec["components"][task["componentRef"]["name"]]
        inputs = task.get("inputs", {})
        definitions = component.get("inputDefinitions", {}).get("parameters", {})
        types = {key: d.get("parameterType") for key, d in definitions.items()}
        # A component's own defaults for the inputs the task leaves unset, as KFP fills them in.
        defaults = {
            key: _typed(d["defaultValue"], d.get("parameterType"))
            for key, d in definitions.items()
            if "defaultValue" in d and key not in inputs.get("parameters", {})
        }
        given = inputs.get("parameters", {})
        # References first, then constants, whose placeholders may name the task's own inputs
        # (an f-string of an upstream output inside a list).
        own = {
            key: _typed(self.parameter(value, scope, name, {}), types.get(key))
            for key, value in given.items()
            if "runtimeValue" not in value
        }
        constants = {
            key: _typed(self.parameter(value, scope, name, own), types.get(key))
            for key, value in given.items()
            if "runtimeValue" in value
        }
        parameters = {**defaults, **{key: {**own, **constants}[key] for key in given}}
        artifacts = {key: self.artifact(value, scope) for key, value in inputs.get("artifacts", {}).items()}
        condition = task.get("triggerPolicy", {}).get("condition")
        if condition:
            try:
                if not evaluate_condition(condition, parameters):
                    return
            except UndecidedCondition:
                when = (*when, condition)
        if "dag" in component:
            yield from self.dag(component["dag"], _Scope(parameters, artifacts), when)
            return
        key = self.components.get(self.identity_of(component))
        if key is None:
            return
        outputs = component.get("outputDefinitions", {}).get("artifacts", {})
        arguments = {**parameters, **artifacts, **{out: artifact_placeholder(name, out) for out in outputs}}
        yield LaunchingTask(task=name, component=key, arguments=arguments, when=when)

    def identity_of(self, component: Mapping[str, Any]) -> str:
        executor = self.spec["deploymentSpec"]["executors"][component["executorLabel"]]
        container = executor.get("container", {})
        return executor_identity(
            container.get("image", ""), container.get("command", []), container.get("args", [])
        )

    def parameter(self, value: Mapping[str, Any], scope: _Scope, task: str, own: Mapping[str, Any]) -> Any:
        if "componentInputParameter" in value:
            return scope.parameters.get(value["componentInputParameter"])
        if "taskOutputParameter" in value:
            ref = value["taskOutputParameter"]
            return output_placeholder(ref["producerTask"], ref["outputParameterKey"])
        if "runtimeValue" in value:
            return self.constant(value["runtimeValue"].get("constant"), {**scope.parameters, **own}, task)
        return None

    def constant(self, value: Any, inputs: Mapping[str, Any], task: str) -> Any:
        """A constant with the backend's placeholders in it resolved: ``inputs`` are the values
        its ``{{$.inputs.parameters[...]}}`` references may name."""
        if isinstance(value, dict):
            return {k: self.constant(v, inputs, task) for k, v in value.items()}
        if isinstance(value, list):
            return [self.constant(v, inputs, task) for v in value]
        if not isinstance(value, str):
            return value
        if value == RUN_ID_PLACEHOLDER:
            return self.run_id
        if value == TASK_NAME_PLACEHOLDER:
            return task
        whole = _INPUT_REFERENCE.fullmatch(value)
        if whole:  # a channel inside a struct (e.g. a dict of pipeline parameters)
            return inputs.get(whole.group(1))
        # A channel inside a string (an f-string argument): its value as text.
        return _INPUT_REFERENCE.sub(lambda match: str(inputs.get(match.group(1), match.group(0))), value)

    def artifact(self, value: Mapping[str, Any], scope: _Scope) -> Any:
        if "componentInputArtifact" in value:
            return scope.artifacts.get(value["componentInputArtifact"])
        if "taskOutputArtifact" in value:
            ref = value["taskOutputArtifact"]
            return artifact_placeholder(ref["producerTask"], ref["outputArtifactKey"])
        return None


# The IR's parameter types, as a user writes values on a command line.
TYPE_NAMES = {
    "NUMBER_INTEGER": "int",
    "NUMBER_DOUBLE": "float",
    "STRING": "str",
    "BOOLEAN": "bool",
    "LIST": "list (JSON)",
    "STRUCT": "dict (JSON)",
}


@dataclasses.dataclass(frozen=True)
class ParameterDoc:
    """One input of a compiled pipeline, as its interface states it."""

    name: str
    type: str
    default: Any
    required: bool
    description: str


def pipeline_parameters(spec: Mapping[str, Any]) -> list[ParameterDoc]:
    """The compiled pipeline's parameters (``root.inputDefinitions``), in the spec's order."""
    parameters = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    return [
        ParameterDoc(
            name=name,
            type=TYPE_NAMES.get(definition.get("parameterType", ""), definition.get("parameterType", "?")),
            default=_typed(definition.get("defaultValue"), definition.get("parameterType")),
            required=not definition.get("isOptional", False),
            description=" ".join(definition.get("description", "").split()),
        )
        for name, definition in parameters.items()
    ]


def compiled_setting(spec: Mapping[str, Any], name: str) -> Any:
    """The value a version compiles in for setting ``name``: the default of its root parameter
    ``name``, or in a version compiled as a run form (:mod:`kfstack.pipelines.run_form`) the
    constant its tasks take as their input ``name`` (a setting and the inputs it reaches share
    their name). None: neither (a setting the pipeline does not have). ``spec`` may be the API's
    ``{"pipeline_spec": ..., "platform_spec": ...}`` of a version uploaded with a platform spec.
    """
    spec = spec.get("pipeline_spec") or {} if "pipeline_spec" in spec else spec
    root = spec.get("root") or {}
    declared = ((root.get("inputDefinitions") or {}).get("parameters") or {}).get(name)
    if isinstance(declared, Mapping):
        return declared.get("defaultValue")
    dags = [root.get("dag") or {}] + [c.get("dag") or {} for c in (spec.get("components") or {}).values()]
    for dag in dags:
        for task in (dag.get("tasks") or {}).values():
            given = ((task.get("inputs") or {}).get("parameters") or {}).get(name) or {}
            if "constant" in (given.get("runtimeValue") or {}):
                return given["runtimeValue"]["constant"]
    return None


def _typed(value: Any, parameter_type: str | None) -> Any:
    """A resolved value as its input's type: the IR writes every number as a double."""
    if isinstance(value, Placeholder):
        return value
    if parameter_type == "NUMBER_INTEGER" and isinstance(value, float) and value.is_integer():
        return int(value)
    if parameter_type == "NUMBER_DOUBLE" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _topological(tasks: Mapping[str, Any]) -> list[str]:
    """Task names, each after the tasks it depends on (ties in name order)."""
    ordered: list[str] = []
    remaining = dict(sorted(tasks.items()))
    while remaining:
        ready = [
            n
            for n, t in remaining.items()
            if all(d in ordered or d not in tasks for d in t.get("dependentTasks", []))
        ]
        if not ready:  # a cycle cannot compile; keep going rather than loop forever
            ready = list(remaining)
        for name in ready:
            ordered.append(name)
            del remaining[name]
    return ordered


# --- conditions ---------------------------------------------------------------------------------

_OPERATORS = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
_CASTS = {"int": int, "float": float, "str": str, "bool": bool}


def evaluate_condition(condition: str, inputs: Mapping[str, Any]) -> bool:
    """Evaluates a KFP trigger condition (a CEL subset) on a task's resolved inputs.

    The compiler writes ``dsl.If(framework == "pytorch")`` as
    ``inputs.parameter_values['pipelinechannel--framework'] == 'pytorch'``, ``dsl.Else`` as
    ``!(...)``, and joins several with ``&&``.

    Raises:
        UndecidedCondition: It reads a :class:`Placeholder` (a value only the run knows).
        ValueError: It uses a construct this evaluator does not know.
    """
    python = re.sub(r"!(?!=)", " not ", condition.replace("&&", " and ").replace("||", " or "))
    python = python.replace("true", "True").replace("false", "False")
    return bool(_evaluate(ast.parse(python.strip(), mode="eval").body, inputs))


def _evaluate(node: ast.AST, inputs: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v, inputs) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, inputs)
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, inputs)
        for op, right_node in zip(node.ops, node.comparators, strict=False):
            right = _evaluate(right_node, inputs)
            if not _OPERATORS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CASTS:
        return _CASTS[node.func.id](_evaluate(node.args[0], inputs))
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "parameter_values"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        value = inputs.get(node.slice.value)
        if isinstance(value, Placeholder):
            raise UndecidedCondition(str(value))
        return value
    raise ValueError(f"unsupported construct in condition: {ast.dump(node)}")


# The pod label and env var that carry the pipeline version into every task (VERSION_ENV).
VERSION_LABEL = "kfstack.dev/pipeline-version"


def replace_task_image(documents: list[dict[str, Any]], current: str, image: str) -> int:
    """Makes every executor that runs in ``current`` run in ``image`` instead, in place; returns
    how many. A team's own components, built on other images, keep theirs."""
    executors = documents[0].get("deploymentSpec", {}).get("executors", {})
    replaced = 0
    for executor in executors.values():
        container = executor.get("container")
        if container is not None and container.get("image") == current:
            container["image"] = image
            replaced += 1
    return replaced


def drop_pod_label(documents: list[dict[str, Any]], key: str, value: str) -> list[str]:
    """Removes the pod label ``key: value`` from every executor of a compiled pipeline's platform
    spec, in place; returns the executors it was removed from."""
    if len(documents) < 2:
        return []
    kubernetes = documents[1].get("platforms", {}).get("kubernetes", {})
    dropped = []
    for name, executor in kubernetes.get("deploymentSpec", {}).get("executors", {}).items():
        labels = executor.get("podMetadata", {}).get("labels", {})
        if labels.get(key) == value:
            del labels[key]
            dropped.append(name)
    return dropped


def stamp_version(
    documents: list[dict[str, Any]], version: str, label_value: str, env_name: str, name_env: str = ""
) -> None:
    """Stamps ``version`` into a compiled pipeline's documents (IR spec, platform spec), in place:

    - ``pipelineInfo``: ``displayName`` ``<name> <version>`` and the description's last line;
    - every executor's container: the env var ``env_name`` (tasks record it in what they make)
      and, given ``name_env``, that env var holding the pipeline's name (a task on a cluster has
      no other way to tell it: its tracking experiment's);
    - every executor's pod: the label :data:`VERSION_LABEL` = ``label_value`` (a label value
      cannot hold ``+``), so ``kubectl get pods -l`` finds a version's pods.
    """
    spec = documents[0]
    info = spec["pipelineInfo"]
    info["displayName"] = f"{info['name']} {version}"
    description = info.get("description", "").rstrip()
    info["description"] = f"{description}\n\nPipeline version {version}.".lstrip()
    executors = spec.get("deploymentSpec", {}).get("executors", {})
    for executor in executors.values():
        container = executor.get("container")
        if container is not None:
            stamped = {env_name: version, **({name_env: info["name"]} if name_env else {})}
            env = [e for e in container.get("env", []) if e.get("name") not in stamped]
            container["env"] = [*env, *({"name": name, "value": value} for name, value in stamped.items())]
    if len(documents) < 2:
        documents.append({"platforms": {"kubernetes": {"deploymentSpec": {"executors": {}}}}})
    platform = documents[1].setdefault("platforms", {}).setdefault("kubernetes", {})
    platform_executors = platform.setdefault("deploymentSpec", {}).setdefault("executors", {})
    for name in executors:
        metadata = platform_executors.setdefault(name, {}).setdefault("podMetadata", {})
        metadata.setdefault("labels", {})[VERSION_LABEL] = label_value


def give_run_times(spec: dict[str, Any], times: Mapping[str, str]) -> list[str]:
    """Gives KFP's run-time placeholders to every task whose component declares an input of
    ``times`` (input -> placeholder, ``{{$.pipeline_job_schedule_time_utc}}``) that the pipeline
    left unset, in place; returns those tasks' names.

    For a version compiled for a cluster, whose backend fills the placeholders in: kfp.local 2.17
    fails resolving them, so a pipeline function cannot pass them to a task that every run has
    (the run's check) without breaking a run under plain kfp.local.
    """
    components = spec.get("components", {})
    dags = [spec.get("root", {}), *components.values()]
    given = []
    for dag in dags:
        for name, task in dag.get("dag", {}).get("tasks", {}).items():
            component = components.get(task.get("componentRef", {}).get("name", ""), {})
            declared = component.get("inputDefinitions", {}).get("parameters", {})
            inputs = task.setdefault("inputs", {}).setdefault("parameters", {})
            for parameter, placeholder in times.items():
                if parameter in declared and parameter not in inputs:
                    inputs[parameter] = {"runtimeValue": {"constant": placeholder}}
                    given.append(name)
    return sorted(set(given))

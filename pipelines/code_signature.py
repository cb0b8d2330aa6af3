"""What a team's training function declares in its own signature, read from its source without
importing it: the hyperparameters it takes (name, type, default, the choices of a ``Literal``,
the description its docstring's ``Args`` gives), the keyword-only locations it needs, and
whether it takes its hyperparameters on an argv instead.

Reading the source (:mod:`ast`) rather than importing the module keeps a pipeline's declaration
free of the training framework: a page compiles on a machine without torch or TensorFlow, and
never runs the team's module-level code. The rules, as docs/pipelines.md ("Where a hyperparameter
is declared") states them:

- a parameter with a default of type ``bool``, ``int``, ``float`` or ``str`` -- annotated so, as
  ``Literal[...]`` of one of them, as ``Annotated[T, ...]``, or not annotated -- is a
  hyperparameter; any other parameter with a default keeps it and is not set by kfstack;
- a parameter without a default is a location (``*, data_dir, model_dir``): the declaration's
  ``arguments`` must give it;
- a first parameter named ``argv`` makes it argv code: its hyperparameters are on the argv it
  parses, so its declaration writes them, each once.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import re
from typing import Any

from kfstack.errors import InvalidParameterError

_SCALARS: dict[str, type] = {"bool": bool, "int": int, "float": float, "str": str}
ARGV = "argv"


@dataclasses.dataclass(frozen=True)
class CodeHyperparameter:
    """A hyperparameter as the function's signature declares it."""

    name: str
    type: type
    default: Any
    choices: tuple[Any, ...] = ()
    description: str = ""


@dataclasses.dataclass(frozen=True)
class CodeSignature:
    """A training function's signature, as kfstack reads it.

    Attributes:
        hyperparameters: In the signature's order.
        locations: The parameters without a default, which the declaration's ``arguments`` give.
        takes_argv: Its first parameter is ``argv``: hyperparameters go on that argv.
    """

    hyperparameters: tuple[CodeHyperparameter, ...]
    locations: tuple[str, ...]
    takes_argv: bool


def read(entry: str) -> CodeSignature:
    """The signature of ``package.module:function``, read from the module's source.

    Raises:
        InvalidParameterError: The module's source cannot be found or parsed, or it defines no
            such function.
    """
    module, _, function = entry.partition(":")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as err:
        raise InvalidParameterError(f"training code {entry}: module {module} not found ({err})") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise InvalidParameterError(f"training code {entry}: no Python source of module {module} to read")
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename=spec.origin)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            return _signature(entry, node)
    raise InvalidParameterError(f"training code {entry}: {spec.origin} defines no function {function}")


def _signature(entry: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> CodeSignature:
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    # Defaults align with the last positional parameters; keyword-only ones carry their own.
    padded: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    pairs = [
        *zip(positional, [*padded, *arguments.defaults], strict=True),
        *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
    ]
    takes_argv = bool(positional) and positional[0].arg == ARGV
    descriptions = _described(ast.get_docstring(node) or "")
    hyperparameters, locations = [], []
    for parameter, default in pairs:
        if takes_argv and parameter is positional[0]:
            continue
        if default is None:
            locations.append(parameter.arg)
            continue
        found = _hyperparameter(entry, parameter, default)
        if found is not None:
            hyperparameters.append(dataclasses.replace(found, description=descriptions.get(found.name, "")))
    if takes_argv and hyperparameters:
        names = ", ".join(h.name for h in hyperparameters)
        raise InvalidParameterError(
            f"training code {entry} takes argv and keyword hyperparameters ({names}): one or the other"
        )
    return CodeSignature(tuple(hyperparameters), tuple(locations), takes_argv)


def _hyperparameter(entry: str, parameter: ast.arg, default_node: ast.expr) -> CodeHyperparameter | None:
    try:
        default = ast.literal_eval(default_node)
    except ValueError:
        return None  # computed: not a value a run form can hold
    annotation = parameter.annotation
    choices: tuple[Any, ...] = ()
    type_name = type(default).__name__ if annotation is None else _type_name(annotation)
    if annotation is not None and _subscripted(annotation) == "Literal":
        choices = tuple(ast.literal_eval(element) for element in _elements(annotation))
        kinds = {type(choice).__name__ for choice in choices}
        type_name = kinds.pop() if len(kinds) == 1 else ""
    if type_name not in _SCALARS:
        return None  # a list, a callable, None: the code keeps its default
    type_ = _SCALARS[type_name]
    if not (isinstance(default, type_) and (type_ is not int or not isinstance(default, bool))) and not (
        type_ is float and type(default) is int
    ):
        raise InvalidParameterError(
            f"training code {entry}: {parameter.arg}'s default {default!r} is not {type_name}"
        )
    value = float(default) if type_ is float and isinstance(default, int) else default
    return CodeHyperparameter(parameter.arg, type_, value, choices)


def _subscripted(annotation: ast.expr) -> str:
    """``Literal`` of ``Literal[...]`` / ``typing.Literal[...]``; empty for anything else."""
    if not isinstance(annotation, ast.Subscript):
        return ""
    value = annotation.value
    return value.attr if isinstance(value, ast.Attribute) else value.id if isinstance(value, ast.Name) else ""


def _elements(annotation: ast.expr) -> list[ast.expr]:
    assert isinstance(annotation, ast.Subscript)
    inner = annotation.slice
    return list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]


def _type_name(annotation: ast.expr) -> str:
    """The scalar a (possibly string) annotation names: ``int``, ``Annotated[int, ...]``."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return ""
    if _subscripted(annotation) == "Annotated":
        return _type_name(_elements(annotation)[0])
    if isinstance(annotation, ast.Name):
        return annotation.id
    return ""


def _described(docstring: str) -> dict[str, str]:
    """Parameter -> its description, from a Google-style ``Args:`` section (continuation lines
    joined)."""
    lines = inspect.cleandoc(docstring).splitlines()
    found: dict[str, str] = {}
    inside, current, indent = False, "", 0
    for line in lines:
        if re.fullmatch(r"(Args|Arguments|Parameters):\s*", line):
            inside, indent = True, -1
            continue
        if not inside:
            continue
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent < 0:
            indent = depth
        if depth < indent or (depth == 0 and line.rstrip().endswith(":")):
            break
        match = re.fullmatch(r"\s*(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line) if depth == indent else None
        if match:
            current = match.group(1)
            found[current] = match.group(2).strip()
        elif current:
            found[current] = f"{found[current]} {line.strip()}".strip()
    return found

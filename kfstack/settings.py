"""Typed settings: one frozen dataclass per concern, validated once, when it is built.

See docs/architecture.md#typed-settings-validated-once.

A settings class is a frozen dataclass deriving from :class:`Settings`; each field declares its
constraints with :func:`setting`. Constructing one validates every field and the class's own
cross-field :meth:`Settings.check`, and raises :class:`~kfstack.errors.InvalidParameterError`
naming each bad field, so a bad value fails before anything is created. Everything below the
edge takes the object.

The library names a value by its field (``TrainingPlacement.node_pool``). What a user set has
the name of a component's argument or a pipeline's parameter (``gpu_pool``), which only the edge
knows: it builds settings with :meth:`Settings.from_arguments` and the names of its arguments
(``names={"node_pool": "gpu_pool"}``), or within :func:`named`, and the messages then name what
the user set.

Why dataclasses and not pydantic: the settings are a handful of scalars, the launcher image and
``kfstack compile`` should import nothing beyond the standard library for them, and a field must
also be able to hold a :class:`Placeholder` (a template reference such as Katib's
``${trialParameters.learningRate}``) wherever a typed value would stand, which is simplest when
the checks are ours.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

from kfstack.errors import InvalidParameterError

S = TypeVar("S", bound="Settings")


class Placeholder(str):
    """A value only the running system knows, standing where a typed value would.

    Examples: Katib's ``${trialParameters.learningRate}`` in a trial template, or the
    ``{{artifact:spark-job/output}}`` URI that ``kfstack render`` writes for an artifact
    the KFP backend will place. Every settings field accepts one; its range and choice checks
    are skipped (the template's owner checks the substituted value), and builders write it into
    the object as it is.
    """

    def __repr__(self) -> str:
        return f"Placeholder({str.__repr__(self)})"


def katib_parameter(name: str) -> Placeholder:
    """The reference a Katib trial template uses for trial parameter ``name``."""
    return Placeholder("${trialParameters." + name + "}")


_KATIB_REFERENCE = re.compile(r"\$\{trialParameters\.([^}]+)\}")


def katib_references(text: str) -> set[str]:
    """The trial parameters ``text`` references."""
    return set(_KATIB_REFERENCE.findall(text))


def substitute_katib_parameters(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every ``${trialParameters.<name>}`` replaced by its value, as Katib's
    trial controller fills a trial template in (plain text replacement of the string value).

    Raises:
        KeyError: A referenced parameter has no value (Katib refuses such a template too).
    """

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"the trial template references ${{trialParameters.{name}}}, which has no value")
        return values[name]

    return _KATIB_REFERENCE.sub(value, text)


def setting(
    default: Any = dataclasses.MISSING,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[Any, ...] | None = None,
) -> Any:
    """A settings field with its constraints.

    Args:
        default: The one default of this value in the project.
        ge, gt, le, lt: Numeric bounds (inclusive ``ge``/``le``, exclusive ``gt``/``lt``).
        choices: The allowed values.
    """
    metadata = {"ge": ge, "gt": gt, "le": le, "lt": lt, "choices": choices}
    return dataclasses.field(default=default, metadata=metadata)


# Field -> the argument name a user set, for the settings being built (see the module docstring).
_ARGUMENT_NAMES: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "argument_names", default=types.MappingProxyType({})
)


@contextlib.contextmanager
def named(names: Mapping[str, str]) -> Iterator[None]:
    """Within it, settings name a field by ``names[field]`` in their messages (the edge's
    argument names); fields it does not list keep their own names."""
    token = _ARGUMENT_NAMES.set(names)
    try:
        yield
    finally:
        _ARGUMENT_NAMES.reset(token)


def argument_name(field: str) -> str:
    """The name a message gives ``field``: the edge's argument name within :func:`named`, else
    the field's own."""
    return _ARGUMENT_NAMES.get().get(field, field)


_UNIONS = (typing.Union, types.UnionType)


def _type_problem(name: str, value: Any, expected: Any) -> str | None:
    if isinstance(value, Placeholder):
        return None
    allowed = typing.get_args(expected) if typing.get_origin(expected) in _UNIONS else (expected,)
    if type(None) in allowed and value is None:
        return None
    for kind in allowed:
        # A container (``tuple[str, ...]``, ``dict[str, str]``): its kind, not its items.
        container = typing.get_origin(kind)
        if container is not None and container not in _UNIONS and isinstance(value, container):
            return None
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return None
        if kind in (str, bool) and isinstance(value, kind):
            return None
        # A value object of its own (a declaration such as kfstack.contracts.TrainingCode).
        if isinstance(kind, type) and kind not in (int, float, str, bool) and isinstance(value, kind):
            return None
    names = " or ".join(getattr(typing.get_origin(k) or k, "__name__", str(k)) for k in allowed)
    return f"{name}={value!r} must be {names}"


def bound_problems(name: str, value: Any, meta: Mapping[str, Any]) -> list[str]:
    """The problems of ``value`` against the range ``meta`` declares (``ge``, ``gt``, ``le``,
    ``lt``, ``choices``), naming it ``name``; a :class:`Placeholder` or None has none."""
    if isinstance(value, Placeholder) or value is None:
        return []
    problems = []
    if meta.get("choices") is not None and value not in meta["choices"]:
        problems.append(f"{name}={value!r} is not one of {', '.join(map(str, meta['choices']))}")
    checks = (
        ("ge", ">=", lambda v, b: v >= b),
        ("gt", ">", lambda v, b: v > b),
        ("le", "<=", lambda v, b: v <= b),
        ("lt", "<", lambda v, b: v < b),
    )
    bounded = any(meta.get(key) is not None for key, _, _ in checks)
    # A bounded number is a finite one: inf passes a lower bound, nan fails every bound unclearly.
    if bounded and isinstance(value, float) and not math.isfinite(value):
        return [*problems, f"{name}={value!r} must be a finite number"]
    for key, word, ok in checks:
        bound = meta.get(key)
        if bound is not None and not ok(value, bound):
            problems.append(f"{name}={value!r} must be {word} {bound}")
    return problems


class Settings:
    """Base of the settings dataclasses: validates on construction.

    Subclasses are ``@dataclasses.dataclass(frozen=True)`` and may override :meth:`check` for
    rules across fields (return one message per problem, naming the fields).
    """

    #: What the settings are for, used in error messages ("training", "spark resources").
    concern: ClassVar[str] = "settings"

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise InvalidParameterError(f"invalid {self.concern}: " + "; ".join(problems))

    def problems(self) -> list[str]:
        """Every problem with these values (empty when valid)."""
        hints = typing.get_type_hints(type(self))
        problems: list[str] = []
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            name = argument_name(field.name)
            type_problem = _type_problem(name, value, hints[field.name])
            if type_problem:
                problems.append(type_problem)
                continue
            problems += bound_problems(name, value, field.metadata)
        return problems if problems else self.check()

    def check(self) -> list[str]:
        """Rules across fields; runs once every field is well typed and in range."""
        return []

    def argument(self, field_name: str) -> str:
        """The name of one of this class's fields in messages (:func:`argument_name`)."""
        return argument_name(field_name)

    def concrete(self, *names: str) -> bool:
        """True when none of the named fields holds a :class:`Placeholder` (cross-field rules
        can only be checked on real values)."""
        return not any(isinstance(getattr(self, n), Placeholder) for n in names)

    @classmethod
    def from_arguments(
        cls: type[S], arguments: Mapping[str, Any], names: Mapping[str, str] | None = None, **overrides: Any
    ) -> S:
        """The settings of ``arguments`` (component or pipeline arguments by name).

        Args:
            arguments: Argument name -> value.
            names: Field -> the argument it is read from, where the two differ (the edge's
                names: messages name the argument).
            overrides: Values by field name; they win over ``arguments``.

        Fields whose argument is absent keep their default.

        Raises:
            InvalidParameterError: A value is missing, mistyped or out of range.
        """
        names = names or {}
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            argument = names.get(field.name, field.name)
            if field.name in overrides:
                values[field.name] = overrides[field.name]
            elif argument in arguments:
                values[field.name] = arguments[argument]
        with named(names):
            try:
                return cls(**values)
            except TypeError as err:  # a required field without an argument
                raise InvalidParameterError(f"invalid {cls.concern}: {err}") from err

    def arguments(self, names: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Argument name -> value of every field (what these settings were built from);
        ``names`` as :meth:`from_arguments` takes them."""
        names = names or {}
        return {names.get(f.name, f.name): getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


# The one input through which a run changes a setting compiled into its pipeline version: a JSON
# object, setting name -> value (docs/pipelines.md#the-run-form). KFP's DSL cannot index a dict
# parameter: every component that takes a setting also takes such an object and applies it, the
# part of the run's that it reads (:func:`overrides_read`), which the run's first task hands it.
SETTINGS_OVERRIDES = "settings_overrides"


def with_overrides(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A component's ``arguments`` (its ``locals()``) with the run's overrides of them applied.

    The object names settings as the pipeline's parameters do, which are the components'
    argument names; a component takes the overrides of its own arguments and leaves the rest to
    the others (the run's validate-parameters task has refused a name no setting has). A number
    keeps the type of the argument it replaces: KFP carries a JSON object as a protobuf
    ``Struct``, whose numbers are all doubles (``3`` arrives as ``3.0``).
    """
    overrides = arguments.get(SETTINGS_OVERRIDES) or {}
    merged = {name: value for name, value in arguments.items() if name != SETTINGS_OVERRIDES}
    for name, value in overrides_read(overrides, merged).items():
        merged[name] = same_kind(value, merged[name])
    return merged


def overrides_read(overrides: Mapping[str, Any], arguments: Iterable[str]) -> dict[str, Any]:
    """Those of ``overrides`` a component whose arguments are named ``arguments`` applies
    (:func:`with_overrides`): the ones naming one of them, as they were given. The one rule of
    what a step reads: the run's validate-parameters task hands each step this part alone
    (:mod:`kfstack.pipelines.validate_run`), so a step's cache key moves with its own settings."""
    names = set(arguments)
    return {name: value for name, value in overrides.items() if name in names}


def same_kind(value: Any, like: Any) -> Any:
    """``value`` as the kind of number ``like`` is, where it is one without loss (``3.0`` for an
    int, ``3`` for a float); any other value as it is."""
    if isinstance(like, bool) or isinstance(value, bool):
        return value
    if isinstance(like, int) and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(like, float) and isinstance(value, int):
        return float(value)
    return value

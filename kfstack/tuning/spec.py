"""The tuning spec: what a Katib ``Experiment`` says, typed and validated before anything runs.

:class:`TuningSettings` holds what a user fills in (the components read it from the ``tune``
and ``tuning_*`` arguments: :mod:`kfstack.components.argument_names`) -- scalars, and the
search space as a small JSON string -- and refuses an invalid spec naming the value: an empty
range, an unknown algorithm or algorithm setting, an objective the trainer never prints, a goal
outside what the metric can reach, early stopping that could never act. The same object drives
the Katib Experiment on Kubernetes and the embedded tuner.

The search space (``search_space``), one entry per tuned trainer argument::

    {"learning_rate": {"type": "double", "min": 0.0003, "max": 0.03, "scale": "log"},
     "batch_size": {"type": "discrete", "values": [512, 1024, 2048]}}

``type``: ``double`` or ``int`` (``min`` < ``max``, optional ``step``, ``scale`` ``linear`` or
``log``) or ``categorical`` / ``discrete`` (``values``, a non-empty list; discrete values are
numbers). The names are hyperparameters the training code declares
(:class:`kfstack.contracts.TrainingCode`, ``code``), each searched as its declared type allows
(:data:`kfstack.contracts.HYPERPARAMETER_TYPES`): an ``int`` by an ``int`` range or whole
``discrete`` values, a ``float`` by a ``double`` range or ``discrete`` values, a ``str`` or
``bool`` by ``categorical`` values (a bool's are ``true`` and ``false``). The objective is one
of the metrics it declares; the others are recorded beside it.

Algorithms and their settings are Katib v0.19's, with the setting names of the suggestion
service its default ``katib-config`` runs each algorithm on (hyperopt for ``random`` and
``tpe``, Optuna for ``grid`` and ``multivariate-tpe``, goptuna for ``cmaes`` and ``sobol``,
scikit-optimize for ``bayesianoptimization``, Katib's own ``hyperband``): a setting Katib would
refuse is refused here first.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from kfstack import contracts
from kfstack.contracts import TrainingCode
from kfstack.settings import Settings, setting

DOUBLE, INT, CATEGORICAL, DISCRETE = "double", "int", "categorical", "discrete"
PARAMETER_TYPES = (DOUBLE, INT, CATEGORICAL, DISCRETE)
LINEAR, LOG = "linear", "log"
SCALES = (LINEAR, LOG)
# Katib's feasibleSpace.distribution for each scale.
KATIB_DISTRIBUTION = {LINEAR: "uniform", LOG: "logUniform"}

MAXIMIZE, MINIMIZE = "maximize", "minimize"
DIRECTIONS = (MAXIMIZE, MINIMIZE)
# How a trial's reports of a metric become its value (Katib metricStrategies).
MIN, MAX, LATEST = "min", "max", "latest"
STRATEGIES = (MIN, MAX, LATEST)

MEDIANSTOP = "medianstop"
NO_EARLY_STOPPING = "none"
EARLY_STOPPING = (MEDIANSTOP, NO_EARLY_STOPPING)

# Katib resumePolicy (Kubernetes only; the embedded tuner resumes from its run directory).
NEVER, LONG_RUNNING, FROM_VOLUME = "Never", "LongRunning", "FromVolume"
RESUME_POLICIES = (NEVER, LONG_RUNNING, FROM_VOLUME)


def _non_negative_int(value: str) -> str | None:
    return None if value.isdigit() else "a whole number >= 0"


def _positive_int(value: str) -> str | None:
    return None if value.isdigit() and int(value) > 0 else "a whole number > 0"


def _float_where(ok: Callable[[float], bool], wanted: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            return None if ok(float(value)) else wanted
        except ValueError:
            return wanted

    return check


def _one_of(*allowed: str) -> Callable[[str], str | None]:
    return lambda value: None if value in allowed else f"one of {', '.join(allowed)}"


# Algorithm -> setting -> check (None when valid, else what the value must be): the settings
# Katib v0.19's default suggestion service for that algorithm accepts.
ALGORITHM_SETTINGS: dict[str, dict[str, Callable[[str], str | None]]] = {
    "random": {"random_state": _non_negative_int},
    "tpe": {
        "random_state": _non_negative_int,
        "gamma": _float_where(lambda v: 0 < v < 1, "a number in (0, 1)"),
        "prior_weight": _float_where(lambda v: v > 0, "a number > 0"),
        "n_EI_candidates": _positive_int,
    },
    "multivariate-tpe": {
        "random_state": _non_negative_int,
        "n_startup_trials": _non_negative_int,
        "n_ei_candidates": _non_negative_int,
    },
    "cmaes": {
        "random_state": _non_negative_int,
        "sigma": _float_where(lambda v: v >= 0, "a number >= 0"),
        "restart_strategy": _one_of("none", "ipop", "bipop"),
    },
    "grid": {"random_state": _non_negative_int},
    "sobol": {},
    "bayesianoptimization": {
        "random_state": _non_negative_int,
        "n_initial_points": _positive_int,
        "base_estimator": _one_of("GP", "RF", "ET", "GBRT"),
        "acq_func": _one_of("gp_hedge", "LCB", "EI", "PI"),
        "acq_optimizer": _one_of("auto", "sampling", "lbfgs"),
    },
    "hyperband": {
        "resource_name": lambda value: None if value else "a trial parameter name",
        "eta": _float_where(lambda v: v > 1, "a number > 1"),
        "r_l": _float_where(lambda v: v > 0, "a number > 0"),
    },
}
ALGORITHMS = tuple(ALGORITHM_SETTINGS)
# What the embedded tuner runs faithfully (Optuna samplers, :mod:`kfstack.tuning.samplers`);
# bayesianoptimization (scikit-optimize's GP) and hyperband (its brackets re-run trials with a
# growing resource) have no faithful Optuna counterpart and run on Katib only.
EMBEDDED_ALGORITHMS = ("random", "tpe", "multivariate-tpe", "cmaes", "grid", "sobol")


@dataclasses.dataclass(frozen=True)
class SearchParameter:
    """One tuned hyperparameter and its feasible space.

    Attributes:
        name: The trainer argument it sets (and the Katib trial parameter's name).
        type: ``double``, ``int``, ``categorical`` or ``discrete``.
        min, max, step: The range of ``double`` and ``int`` (``step``: optional quantisation).
        values: The choices of ``categorical`` and ``discrete``, as Katib writes them (strings).
        scale: ``linear`` or ``log`` (Katib ``uniform`` / ``logUniform``).
    """

    name: str
    type: str
    min: float | None = None
    max: float | None = None
    step: float | None = None
    values: tuple[str, ...] = ()
    scale: str = LINEAR

    @property
    def is_range(self) -> bool:
        return self.type in (DOUBLE, INT)

    def grid(self) -> list[Any]:
        """Every value a ``grid`` search visits, as Katib enumerates them: ``int`` from min to
        max by ``step`` (default 1), ``double`` likewise but only with a ``step``.

        Raises:
            ValueError: A ``double`` without a step (it has no finite grid).
        """
        if self.type == INT:
            assert self.min is not None and self.max is not None
            return list(range(int(self.min), int(self.max) + 1, int(self.step or 1)))
        if self.type == DOUBLE:
            if not self.step:
                raise ValueError(f"{self.name}: a grid over a double needs a step")
            assert self.min is not None and self.max is not None
            count = math.floor((self.max - self.min) / self.step + 1e-9) + 1
            return [self.min + i * self.step for i in range(count)]
        return list(self.values)


def _number(value: Any) -> float | None:
    return float(value) if contracts.is_finite_number(value) else None


def parse_search_space(
    text: str, code: TrainingCode, parameter: str = "search_space"
) -> tuple[SearchParameter, ...]:
    """The search space of a JSON string (see the module docstring).

    Raises:
        ValueError: Malformed JSON or an invalid entry; the message names ``parameter`` and the
            entry.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{parameter}: not valid JSON ({err.msg} at character {err.pos})") from None
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{parameter}: must be a non-empty JSON object of name -> feasible space")
    return tuple(_parse_parameter(f"{parameter}.{name}", name, entry, code) for name, entry in raw.items())


def _parse_parameter(where: str, name: str, entry: Any, code: TrainingCode) -> SearchParameter:
    if name not in code.hyperparameters:
        raise ValueError(
            f"{where}: the training code declares no hyperparameter {name!r}; "
            f"declared: {', '.join(code.hyperparameters) or 'none'}"
        )
    declared = code.hyperparameters[name]
    allowed = contracts.HYPERPARAMETER_TYPES[declared]
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: must be an object with a type")
    kind = entry.get("type")
    if kind not in PARAMETER_TYPES:
        raise ValueError(f"{where}.type={kind!r}: must be one of {', '.join(PARAMETER_TYPES)}")
    if kind not in allowed:
        raise ValueError(
            f"{where}.type={kind!r}: {name} is declared {declared}, searched as {' or '.join(allowed)}"
        )
    keys = {"type", "min", "max", "step", "scale"} if kind in (DOUBLE, INT) else {"type", "values"}
    unknown = sorted(set(entry) - keys)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(unknown)} for a {kind}; allowed: {', '.join(sorted(keys))}"
        )
    if kind in (CATEGORICAL, DISCRETE):
        return _parse_choices(where, name, kind, entry.get("values"), declared)
    return _parse_range(where, name, kind, entry)


def _parse_choices(where: str, name: str, kind: str, values: Any, declared: str) -> SearchParameter:
    if not isinstance(values, list) or not values:
        raise ValueError(f"{where}.values: a {kind} needs a non-empty list of values")
    if kind == DISCRETE and any(_number(v) is None for v in values):
        raise ValueError(f"{where}.values: discrete values must be finite numbers")
    # Katib passes every value as a string; an int-valued argument needs whole numbers.
    if declared == contracts.INT and any(not float(v).is_integer() for v in values):
        raise ValueError(f"{where}.values: {name} is declared int, so its values are whole numbers")
    texts = tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
    if len(set(texts)) != len(texts):
        raise ValueError(f"{where}.values: a value appears twice")
    for text in texts:
        try:
            contracts.render_value(name, declared, text)
        except contracts.InvalidParameterError as err:
            raise ValueError(f"{where}.values: {err}") from None
    return SearchParameter(name=name, type=kind, values=texts)


def _parse_range(where: str, name: str, kind: str, entry: dict) -> SearchParameter:
    low, high, step = _number(entry.get("min")), _number(entry.get("max")), entry.get("step")
    if low is None or high is None:
        raise ValueError(f"{where}: a {kind} needs finite numbers min and max")
    if kind == INT and not (low.is_integer() and high.is_integer()):
        raise ValueError(f"{where}: an int range needs whole-number min and max")
    if low >= high:
        raise ValueError(f"{where}: empty range (min={entry['min']} must be < max={entry['max']})")
    scale = entry.get("scale", LINEAR)
    if scale not in SCALES:
        raise ValueError(f"{where}.scale={scale!r}: must be one of {', '.join(SCALES)}")
    if scale == LOG and low <= 0:
        raise ValueError(f"{where}: a log scale needs min > 0 (min={entry['min']})")
    if step is not None:
        step_value = _number(step)
        if step_value is None or step_value <= 0 or step_value > high - low:
            raise ValueError(f"{where}.step={step!r}: must be > 0 and at most max - min")
        if kind == INT and not step_value.is_integer():
            raise ValueError(f"{where}.step={step!r}: an int range takes a whole-number step")
        if scale == LOG:
            raise ValueError(f"{where}: a step applies to a linear scale only")
        step = step_value
    return SearchParameter(name=name, type=kind, min=low, max=high, step=step, scale=scale)


def parse_algorithm_settings(
    algorithm: str, text: str, parameter: str = "algorithm_settings"
) -> dict[str, str]:
    """The algorithm's settings of a JSON object (values as Katib passes them: strings).

    Raises:
        ValueError: Malformed JSON, a setting the algorithm does not take, a bad value.
    """
    try:
        raw = json.loads(text or "{}")
    except json.JSONDecodeError as err:
        raise ValueError(f"{parameter}: not valid JSON ({err.msg} at character {err.pos})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{parameter}: must be a JSON object of setting name -> value")
    known = ALGORITHM_SETTINGS[algorithm]
    settings = {}
    for name, value in raw.items():
        if name not in known:
            takes = ", ".join(known) or "no settings"
            raise ValueError(f"{parameter}: {algorithm} takes no setting {name!r} (it takes {takes})")
        text_value = str(value).lower() if isinstance(value, bool) else str(value)
        problem = known[name](text_value)
        if problem:
            raise ValueError(f"{parameter}.{name}={value!r}: must be {problem}")
        settings[name] = text_value
    return settings


@dataclasses.dataclass(frozen=True)
class TuningSettings(Settings):
    """The tuning step: search space, objective, algorithm, early stopping and budget.

    Attributes:
        code: The training code the trials run, as declared (its hyperparameters and metrics).
        search_space: JSON search space over its hyperparameters (see the module docstring).
        objective: The metric to optimise: one the code declares it prints.
        enabled: Tune before the final training; ``False`` trains with the pipeline's own
            hyperparameters.
        algorithm: Katib algorithm name (:data:`ALGORITHMS`).
        algorithm_settings: JSON object of the algorithm's settings, e.g. ``{"random_state": 7}``.
        direction: ``maximize`` or ``minimize``.
        goal: Stop once the best trial reaches it; ``0`` = no goal; outside the objective's
            declared range (``code.metric_ranges``) it is refused.
        require_goal: Fail the step when the trials end without reaching ``goal``.
        metric_strategy: How a trial's reports of the objective become its value: ``min``,
            ``max``, ``latest``; empty: by direction (``max`` when maximising), Katib's default.
        early_stopping: ``medianstop`` or ``none``.
        min_trials_required: medianstop: succeeded trials needed before any trial is stopped.
        start_step: medianstop: the report (epoch) at which a trial is judged.
        trial_epochs: Epochs each trial trains (the final training takes ``epochs``).
        parallel_trials: Trials running at once (Katib ``parallelTrialCount``).
        max_trials: Trials in all (``maxTrialCount``).
        max_failed_trials: ``maxFailedTrialCount``: the step fails once this many trials failed
            (Katib counts trials that never printed the objective as failed; 0 behaves as 1).
        resume_policy: Kubernetes: Katib ``resumePolicy`` (``Never``, ``LongRunning``,
            ``FromVolume``).
    """

    concern = "tuning settings"

    # What the trials run: the hyperparameters a search space may set, the metrics an objective
    # may name (the step's declaration of the team's code). No defaults: they are the code's.
    code: TrainingCode
    search_space: str = setting()
    objective: str = setting()
    enabled: bool = setting(True)
    algorithm: str = setting("tpe", choices=ALGORITHMS)
    algorithm_settings: str = setting("{}")
    direction: str = setting(MAXIMIZE, choices=DIRECTIONS)
    goal: float = setting(0.0)
    require_goal: bool = setting(False)
    metric_strategy: str = setting("", choices=("", *STRATEGIES))
    early_stopping: str = setting(MEDIANSTOP, choices=EARLY_STOPPING)
    min_trials_required: int = setting(3, ge=1)
    start_step: int = setting(2, ge=1)
    trial_epochs: int = setting(6, ge=1)
    parallel_trials: int = setting(3, ge=1)
    max_trials: int = setting(12, ge=1)
    max_failed_trials: int = setting(3, ge=0)
    resume_policy: str = setting(NEVER, choices=RESUME_POLICIES)

    def check(self) -> list[str]:
        problems = []
        name = self.argument
        if self.objective not in self.code.metrics:
            problems.append(
                f"{name('objective')}={self.objective!r} is not a metric the training code declares "
                f"(declared: {', '.join(self.code.metrics) or 'none'})"
            )
        for parse in (lambda: self.parameters, lambda: self.algorithm_config):
            try:
                parse()
            except ValueError as err:
                problems.append(str(err))
        if problems:
            return problems
        problems += self._goal_problems()
        if self.parallel_trials > self.max_trials:
            problems.append(
                f"{name('parallel_trials')}={self.parallel_trials} must be <= "
                f"{name('max_trials')}={self.max_trials}"
            )
        if self.early_stopping == MEDIANSTOP and self.start_step >= self.trial_epochs:
            problems.append(
                f"{name('start_step')}={self.start_step} must be < "
                f"{name('trial_epochs')}={self.trial_epochs}: "
                f"medianstop judges a trial at its start_step-th epoch, so with start_step >= epochs "
                f"no trial can stop early (Katib's default start_step is 4)"
            )
        if self.early_stopping == MEDIANSTOP and self.min_trials_required >= self.max_trials:
            problems.append(
                f"{name('min_trials_required')}={self.min_trials_required} must be < "
                f"{name('max_trials')}={self.max_trials}: medianstop acts only after that many trials "
                f"succeeded"
            )
        problems += self._algorithm_problems()
        return problems

    def _goal_problems(self) -> list[str]:
        goal = self.argument("goal")
        if not math.isfinite(self.goal):
            return [f"{goal}={self.goal} must be a finite number (0 means none)"]
        if not self.has_goal:
            needs = f"{self.argument('require_goal')}=true needs a {goal} (0 means none)"
            return [needs] if self.require_goal else []
        if self.objective not in self.code.metric_ranges:
            return []  # a metric of no declared range: any finite goal
        low, high = self.code.metric_ranges[self.objective]
        reachable = low < self.goal <= high if self.direction == MAXIMIZE else low <= self.goal < high
        if reachable:
            return []
        bounds = f"{low} < goal <= {high}" if self.direction == MAXIMIZE else f"{low} <= goal < {high}"
        return [
            f"{goal}={self.goal}: {self.direction} {self.objective} never reaches it, or reaches "
            f"it by chance ({self.objective} lies in [{low}, {high}]; a goal needs {bounds})"
        ]

    def _algorithm_problems(self) -> list[str]:
        algorithm, space = self.argument("algorithm"), self.argument("search_space")
        ranges = [p for p in self.parameters if p.is_range]
        if self.algorithm == "cmaes" and len(ranges) < 2:
            return [f"{algorithm}=cmaes needs two or more double or int parameters ({space})"]
        if self.algorithm == "grid":
            try:
                combinations = math.prod(len(p.grid()) for p in self.parameters)
            except ValueError as err:
                return [f"{algorithm}=grid: {err} in {space}"]
            if self.max_trials > combinations:
                return [
                    f"{self.argument('max_trials')}={self.max_trials} > the {combinations} combinations of "
                    f"the grid (Katib refuses it): lower it or widen the search space"
                ]
        if self.algorithm == "hyperband":
            return [
                f"{algorithm}=hyperband is not supported: its brackets re-run trials with a growing "
                "resource, which neither kfstack's trials nor its embedded tuner do"
            ]
        return []

    @functools.cached_property
    def parameters(self) -> tuple[SearchParameter, ...]:
        """The parsed search space."""
        return parse_search_space(self.search_space, self.code, self.argument("search_space"))

    @functools.cached_property
    def algorithm_config(self) -> dict[str, str]:
        """The parsed algorithm settings (name -> value string)."""
        return parse_algorithm_settings(
            self.algorithm, self.algorithm_settings, self.argument("algorithm_settings")
        )

    @property
    def has_goal(self) -> bool:
        return self.goal != 0.0

    @property
    def strategy(self) -> str:
        """The objective's metric strategy (Katib's default follows the direction)."""
        return self.metric_strategy or (MAX if self.direction == MAXIMIZE else MIN)

    @property
    def metric_strategies(self) -> dict[str, str]:
        """Metric -> strategy for the objective and every additional metric.

        The additional metrics get ``latest`` (their value at the trial's last report), set
        explicitly: Katib v0.19's defaulting would give them the objective's direction, e.g. the
        *highest* log loss of a trial that maximises AUC.
        """
        return {self.objective: self.strategy, **dict.fromkeys(self.additional_metrics, LATEST)}

    @property
    def additional_metrics(self) -> tuple[str, ...]:
        """The code's other declared metrics: recorded per trial, not optimised."""
        return tuple(m for m in self.code.metrics if m != self.objective)

    def better(self, a: float, b: float) -> bool:
        """Whether objective value ``a`` is strictly better than ``b``."""
        return a > b if self.direction == MAXIMIZE else a < b

    def reached(self, value: float) -> bool:
        """Whether ``value`` reaches the goal (Katib: ``>=`` goal when maximising)."""
        return self.has_goal and (value >= self.goal if self.direction == MAXIMIZE else value <= self.goal)


# Budget `kfstack run --local` applies unless the user sets these (the compiled defaults suit a
# cluster): 4 trials of 4 epochs, one at a time (a trial's ranks already use both cores of a
# small machine); medianstop judges at epoch 2 once 2 trials succeeded, so trials 3 and 4 can
# stop early.
LOCAL_BUDGET: Mapping[str, Any] = {
    "max_trials": 4,
    "parallel_trials": 1,
    "trial_epochs": 4,
    "start_step": 2,
    "min_trials_required": 2,
}

"""Katib's algorithms as Optuna samplers, for the embedded tuner.

Each algorithm is mapped onto what Katib v0.19's default suggestion service for it does, with
that service's setting names (:data:`kfstack.tuning.spec.ALGORITHM_SETTINGS`):

- ``random`` (hyperopt on Katib): uniform sampling, ``random_state`` -> seed.
- ``tpe`` (hyperopt on Katib): TPE whose random start is the first request -- Katib asks for
  ``parallelTrialCount`` trials at once and hyperopt draws those at random
  (``n_startup_jobs=current_request_number``); ``gamma`` is hyperopt's fraction (good trials =
  ``ceil(gamma * sqrt(n))``, at most 25), ``prior_weight`` and ``n_EI_candidates`` as in
  hyperopt; no constant liar (hyperopt ignores running trials).
- ``multivariate-tpe`` (Optuna on Katib): Optuna's multivariate TPE with the constant liar, as
  Katib's Optuna service configures it.
- ``cmaes`` (goptuna on Katib): CMA-ES from the first trial (goptuna's service sets no random
  start), ``sigma`` -> initial step size. ``restart_strategy`` ipop/bipop is refused locally:
  Optuna's CmaEsSampler no longer restarts (since Optuna 4.4 it silently ignores the option).
- ``grid`` (Optuna on Katib): every combination of :meth:`SearchParameter.grid`.
- ``sobol`` (goptuna on Katib): an unscrambled Sobol sequence.

The search space is Katib's Optuna service's (``_get_optuna_search_space``): int and double
ranges with their step, log scales as log distributions, categorical and discrete values as
categorical choices of the strings Katib passes. Values are handed to a trial as Katib formats
them: ``str()`` of the Python number.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Literal

import optuna

from kfstack.errors import InvalidParameterError
from kfstack.tuning.spec import (
    CATEGORICAL,
    DISCRETE,
    DOUBLE,
    EMBEDDED_ALGORITHMS,
    INT,
    LOG,
    MAXIMIZE,
    SearchParameter,
    TuningSettings,
)

# hyperopt's defaults where Katib passes nothing (hyperopt.tpe: gamma, prior_weight,
# n_EI_candidates, and its linear_forgetting cap on the good trials).
HYPEROPT_GAMMA = 0.25
HYPEROPT_PRIOR_WEIGHT = 1.0
HYPEROPT_EI_CANDIDATES = 24
HYPEROPT_GOOD_TRIALS_CAP = 25


def check_embedded(tuning: TuningSettings) -> None:
    """Raises unless the embedded tuner runs ``tuning.algorithm`` faithfully.

    Raises:
        InvalidParameterError: bayesianoptimization or hyperband (Katib only).
    """
    if tuning.algorithm not in EMBEDDED_ALGORITHMS:
        raise InvalidParameterError(
            f"tuning_algorithm={tuning.algorithm} runs on Katib only (platform=kubernetes): the "
            f"embedded tuner has no faithful counterpart of it; locally use one of "
            f"{', '.join(EMBEDDED_ALGORITHMS)}"
        )
    if tuning.algorithm_config.get("restart_strategy", "none") != "none":
        raise InvalidParameterError(
            "tuning_algorithm_settings.restart_strategy: CMA-ES restarts run on Katib only "
            "(platform=kubernetes); Optuna's CmaEsSampler ignores them. Locally use 'none'"
        )


def distribution(parameter: SearchParameter) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution of one parameter, as Katib's Optuna service builds it."""
    low, high = parameter.min, parameter.max
    if parameter.type == INT:
        assert low is not None and high is not None
        if parameter.scale == LOG:
            return optuna.distributions.IntDistribution(max(1, int(low)), int(high), log=True)
        return optuna.distributions.IntDistribution(int(low), int(high), step=int(parameter.step or 1))
    if parameter.type == DOUBLE:
        assert low is not None and high is not None
        if parameter.scale == LOG:
            return optuna.distributions.FloatDistribution(max(1e-10, low), high, log=True)
        return optuna.distributions.FloatDistribution(low, high, step=parameter.step)
    return optuna.distributions.CategoricalDistribution(list(parameter.values))


def search_space(tuning: TuningSettings) -> dict[str, optuna.distributions.BaseDistribution]:
    return {parameter.name: distribution(parameter) for parameter in tuning.parameters}


def katib_value(parameter: SearchParameter, value: Any) -> str:
    """A sampled value as Katib hands it to the trial template (a string)."""
    if parameter.type == INT:
        return str(int(value))
    if parameter.type == DOUBLE:
        return str(float(value))
    return str(value)


def optuna_value(parameter: SearchParameter, text: str) -> Any:
    """The inverse of :func:`katib_value`: a recorded assignment back in its distribution."""
    if parameter.type == INT:
        return int(text)
    if parameter.type == DOUBLE:
        return float(text)
    assert parameter.type in (CATEGORICAL, DISCRETE)
    return text


class _KatibGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid, without its own stop: once a trial takes the grid's last point it calls
    ``Study.stop()``, which only works inside ``Study.optimize``. The tuner asks and tells
    trials itself and stops at ``max_trials``, which a grid spec never lets exceed the grid
    (:class:`~kfstack.tuning.spec.TuningSettings`), as Katib's own grid does."""

    def after_trial(self, study, trial, state, values) -> None:
        return None


def make_sampler(tuning: TuningSettings) -> optuna.samplers.BaseSampler:
    """The sampler of ``tuning.algorithm`` with its settings (see the module docstring).

    Raises:
        InvalidParameterError: An algorithm the embedded tuner does not run.
    """
    check_embedded(tuning)
    # hyperopt's gamma and prior_weight are deprecated Optuna options (still there in the pinned
    # 5.0) and QMCSampler is marked experimental: the warnings would only clutter a trial log.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _sampler(tuning)


def _sampler(tuning: TuningSettings) -> optuna.samplers.BaseSampler:
    config = tuning.algorithm_config
    seed = int(config["random_state"]) if "random_state" in config else None
    name = tuning.algorithm
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        gamma = float(config.get("gamma", HYPEROPT_GAMMA))
        return optuna.samplers.TPESampler(
            n_startup_trials=min(tuning.parallel_trials, tuning.max_trials),
            n_ei_candidates=int(config.get("n_EI_candidates", HYPEROPT_EI_CANDIDATES)),
            prior_weight=float(config.get("prior_weight", HYPEROPT_PRIOR_WEIGHT)),
            gamma=lambda n: min(math.ceil(gamma * math.sqrt(n)), HYPEROPT_GOOD_TRIALS_CAP),
            seed=seed,
            constant_liar=False,
        )
    if name == "multivariate-tpe":
        return optuna.samplers.TPESampler(
            n_startup_trials=int(config.get("n_startup_trials", 10)),
            n_ei_candidates=int(config.get("n_ei_candidates", 24)),
            seed=seed,
            multivariate=True,
            constant_liar=True,
        )
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(
            n_startup_trials=0,
            sigma0=float(config["sigma"]) if "sigma" in config else None,
            seed=seed,
            # The first trial has no completed trial to infer a joint space from, so Optuna
            # samples it independently (and says so on every trial); that is expected here.
            warn_independent_sampling=False,
        )
    if name == "grid":
        grid = {
            p.name: [katib_value(p, v) if p.type in (CATEGORICAL, DISCRETE) else v for v in p.grid()]
            for p in tuning.parameters
        }
        return _KatibGridSampler(grid, seed=seed)
    assert name == "sobol"
    return optuna.samplers.QMCSampler(qmc_type="sobol", scramble=False, seed=seed)


def direction(tuning: TuningSettings) -> Literal["maximize", "minimize"]:
    return "maximize" if tuning.direction == MAXIMIZE else "minimize"

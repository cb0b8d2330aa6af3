"""Hyperparameter tuning of the trainers, with Katib's semantics on either platform.

- :mod:`.spec`: the tuning spec (search space, objective, algorithm, early stopping, budget),
  typed and validated once.
- :mod:`.metric_lines`: Katib's StdOut metrics collector -- its filter regex and how it reduces
  a trial's reports to one value -- the one parser of metric lines in the project.
- :mod:`.median_stop`: Katib's ``medianstop`` early stopping, as Katib really computes it.
- :mod:`.samplers`: Katib algorithm names -> Optuna samplers, for the embedded tuner.
- :mod:`.local_tuner`: the embedded trial loop (parallel trials, early stopping, failures,
  resume).
- :mod:`.report`: the trials table and the optimisation plot.
"""

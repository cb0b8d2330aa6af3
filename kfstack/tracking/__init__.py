"""Run tracking in MLflow, on both platforms, laid out as KFP's MLflow plugin lays it out.

One pipeline run is one MLflow run (the *parent*), in the experiment named after the pipeline;
each task is a nested run under it, and each tuning trial a nested run under the tuning task's.
Who makes them:

- On a cluster whose KFP API server has its MLflow plugin on (KFP 2.17 ``plugins.mlflow`` with
  ``injectUserEnvVars``), KFP makes the parent and each task's run and sets ``MLFLOW_RUN_ID`` to
  the task's in its container: kfstack logs into that run and makes neither.
- On a cluster without it (KFP 2.16, Kubeflow 26.03), a launching task that finds a tracking URI
  (the environment's ``tracking_uri`` setting) and no ``MLFLOW_RUN_ID`` makes its own nested run,
  under the parent it finds (or makes) by the KFP run's id (:mod:`kfstack.tracking.cluster`, which
  also says what the pods it launches are told).
- Embedded, ``kfstack run --local`` plays the plugin's part: it makes the parent when the run
  starts and each task's run when the task starts, and sets ``MLFLOW_RUN_ID`` in the task's
  processes (or, while the store's server starts, a run file kfstack's wrappers read:
  :mod:`kfstack.tracking.embedded`).
- A tuning trial's run is made by the trial itself (its training entrypoint, on the chief
  replica), from the trial name Katib substitutes (:data:`kfstack.contracts.TRIAL_ENV`) and the
  tuning task's run id the trial template carries (:data:`PARENT_RUN_ENV`).

The team's own code finds its run without configuration: ``MLFLOW_TRACKING_URI`` and
``MLFLOW_RUN_ID`` are in its environment, so ``mlflow.start_run()`` (or any ``mlflow.log_*``)
joins the task's run, or the trial's.

Tracking never costs a run (:mod:`kfstack.tracking.client`): every call is bounded, a failure
turns tracking off for the rest of the process and is said once, and nothing else kfstack
records depends on it. docs/tracking.md is the user's guide.
"""

"""The Kubernetes platform: what kfstack creates on a cluster and how it watches it.

- :mod:`.node_pools` -- node-pool profiles (``node_pools.yaml``): selectors, tolerations,
  accelerators, priority, Kueue queue, spot.
- :mod:`.pods` -- restricted pod security, scratch volumes, Secret references.
- :mod:`.training_jobs`, :mod:`.train_job`, :mod:`.spark_application` -- pure builders of
  PyTorchJob, TFJob, TrainJob and SparkApplication manifests (the same functions serve the
  launchers and ``kfstack render``).
- :mod:`.training_apis` -- which training API (v1 operator or Trainer v2) runs a job.
- :mod:`.naming` -- deterministic names, run labels, the pod's own namespace.
- :mod:`.resources` -- how each kind's status reads as a phase; its primary pod; the Katib
  trial contract of the training kinds.
- :mod:`.launcher` -- adopt-or-create, wait, report, delete on cancel; the run cleanup.

Nothing here has run against a real cluster: the builders are validated against the upstream
CRDs and the SDK models, the launcher against a fake API server at the HTTP boundary.
"""

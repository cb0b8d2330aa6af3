"""Uploads, runs and schedules on a Kubeflow Pipelines API server, through ``kfp.Client``.

The functions take a connected client (:func:`~kfstack.app.kfp_server.connection.connect`) and
speak the v2beta1 API. Where a ``kfp.Client`` convenience method fits, they call it; where it
does not, they call the generated service APIs the client exposes (``client.pipelines``,
``client.pipeline_uploads``, ``client.experiments``, ``client.runs``, ``client.recurring_runs``),
for three reasons:

- ``upload_pipeline`` names a new pipeline's first version after the pipeline, not after the
  version we upload (kubeflow/pipelines#5881, #13753), see
  :func:`~kfstack.app.kfp_server.pipelines.upload`;
- ``run_pipeline`` and ``create_recurring_run`` need both a pipeline id and a version id, so they
  cannot create a recurring run that follows the pipeline's latest version (KFP >= 2.5 takes a
  ``pipeline_version_reference`` with the pipeline id alone for that, kubeflow/pipelines#11560);
- the convenience methods print their own "details" links; ``kfstack`` prints its own lines.

One module per concern: :mod:`~kfstack.app.kfp_server.connection` (the client, its time bounds,
API errors as :mod:`kfstack.errors`, what every request shares),
:mod:`~kfstack.app.kfp_server.pipelines` (pipelines and their versions, upload),
:mod:`~kfstack.app.kfp_server.runs` (experiments and runs) and
:mod:`~kfstack.app.kfp_server.recurring_runs` (schedules).
"""

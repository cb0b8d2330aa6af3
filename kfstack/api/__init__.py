"""kfstack's public API: what a team's code and a team's pipelines import, and all they import.

Everything a team uses is named in this package, by audience:

- :mod:`kfstack.api` (this module): what any of a team's code may use -- the locations a step's
  code reads from its environment, the report and lineage it writes, progress lines, the errors,
  typed settings, the data window a run reads and the data profile a drift check compares, the
  registration of a package's pipelines. It imports neither kfp nor pyspark nor a training
  framework.
- :mod:`kfstack.api.pipeline`: declaring a pipeline -- a training pipeline as data, kfstack's
  components, parameters and the catalog of the components' own, the wiring of a run (its frame,
  a task's inputs, a cluster task's pod settings), and the settings a pipeline's run check
  builds.
- :mod:`kfstack.api.spark`: a team's PySpark application -- validate-and-quarantine helpers and
  the Spark driver's class archive.
- :mod:`kfstack.api.training`: a team's training code -- the operators' environment read as one
  object, checkpoints, the shards a rank reads, metrics and Katib's metric lines, throughput, the
  termination message.
- :mod:`kfstack.api.serving`: a team's model server -- kfstack's server around a ``kserve.Model``
  (request metrics, body limits, live drift) and typed records out of KServe's V1/V2 requests.

The compatibility promise: the names these modules list in ``__all__`` are kfstack's public
API, and they change only as docs/team-guide.md ("What kfstack promises") says -- announced in
CHANGELOG.md with the way to upgrade, a name to be removed first kept for one minor release with a
``DeprecationWarning`` naming its replacement. Every other module under ``kfstack`` is internal
and may change in any release; an import-linter contract holds kfstack's examples, and the one a
``kfstack init`` project carries holds a team's package, to these modules. docs/api.md lists every
name (``python -m kfstack.api.reference`` writes it).

A team's code never needs kfstack to run (docs/contracts.md): these are conveniences over the
environment variables, files and stdout lines of the contract.
"""

from kfstack.contracts import (
    CHECKPOINT_URI_ENV,
    INPUT_URI_ENV,
    MODEL_DIR_ENV,
    OUTPUT_URI_ENV,
    REPORT_PATH_ENV,
    write_data_lineage,
    write_report,
)
from kfstack.errors import DataQualityError, InvalidParameterError, KfstackError, TrainingFailedError
from kfstack.lineage import document_hash
from kfstack.monitoring.profiling import profile_dataset
from kfstack.monitoring.window import DataWindow

# Registration is here, not in kfstack.api.pipeline: a package's __init__ registers its pipelines,
# and every step of its code imports that __init__ -- inside a KFP task too, where kfp runs in its
# runtime mode and kfstack's components (the rest of kfstack.api.pipeline) cannot be defined.
from kfstack.pipelines import PipelineEntry
from kfstack.progress import report as report_progress
from kfstack.settings import Settings, setting
from kfstack.uris import fsspec_uri
from kfstack.uris import join as join_uri

__all__ = [
    "CHECKPOINT_URI_ENV",
    "INPUT_URI_ENV",
    "MODEL_DIR_ENV",
    "OUTPUT_URI_ENV",
    "REPORT_PATH_ENV",
    "DataQualityError",
    "DataWindow",
    "InvalidParameterError",
    "KfstackError",
    "PipelineEntry",
    "Settings",
    "TrainingFailedError",
    "document_hash",
    "fsspec_uri",
    "join_uri",
    "profile_dataset",
    "report_progress",
    "setting",
    "write_data_lineage",
    "write_report",
]

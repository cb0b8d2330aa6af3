"""One error hierarchy (docs/architecture.md#one-error-hierarchy): callers catch ``KfstackError``.

Two families tell the user what to do next, and the CLI maps them onto exit codes:

- :class:`BadInputError` -- what was asked for is wrong or cannot run here (a parameter out of
  range, an unknown pipeline or node pool, no cluster for ``platform=kubernetes``); nothing was
  started. ``kfstack`` prints one line naming what to fix and exits 2.
- :class:`RunFailedError` -- the work started and failed (bad data, a crashed trainer, a failed
  cluster job). ``kfstack`` exits 1 with the failing step's own error.

:class:`CancelledError` is neither: the step was stopped (SIGTERM; Ctrl-C exits 130).

Raise the most specific class, keep the cause with ``raise ... from err``, and write messages a
person reading a failed pipeline task in the KFP UI can act on.
"""


class KfstackError(Exception):
    """Base class of every error this project raises on purpose."""


class BadInputError(KfstackError):
    """The request is wrong or cannot run here; nothing was started."""


class UsageError(BadInputError):
    """A command line or API call names something that does not exist (a pipeline, a
    parameter) or is malformed."""


class InvalidParameterError(BadInputError, ValueError):
    """A parameter is out of range or inconsistent; raised before anything is submitted."""


class PlatformNotAvailableError(BadInputError):
    """The requested platform cannot run this step (no cluster reachable); nothing was submitted."""


class LaunchNamespaceError(PlatformNotAvailableError):
    """The namespace a step launches in is not ready for it: the step's service account lacks a
    permission there (an access review said so), or a Kueue LocalQueue its jobs name is missing.
    Nothing was submitted."""


class ControllerReleaseError(PlatformNotAvailableError):
    """The cluster's controller release does not know a field a step's object needs (its API
    server refused it under strict field validation); the message names the field and the
    release that has it. Nothing was created.

    Attributes:
        fields: The refused fields, as the API server named them (``spec.runtimePatches``).
    """

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


class KfpServerUnavailableError(PlatformNotAvailableError):
    """The KFP API server cannot be reached (connection refused or timed out, unknown host, a TLS
    failure); nothing was submitted."""


class KfpAuthError(BadInputError):
    """The KFP API server (or the proxy in front of it) refused the credentials: 401 or 403, or a
    login page instead of the API. Nothing was submitted."""


class KfpRequestError(BadInputError):
    """The KFP API server refused a request (a 4xx or 5xx answer other than 401/403); the message
    carries its own reason. What the command did before it is said in its output."""


class RunFailedError(KfstackError):
    """Work that started has failed."""


class DataQualityError(RunFailedError):
    """Input data failed validation badly enough that the job refuses to go on."""


class TrainingFailedError(RunFailedError):
    """A training process group failed and could not be recovered by restarts."""


class TuningFailedError(RunFailedError):
    """Tuning ended without a usable result: too many failed trials, or the goal unreached when
    it was required. ``result`` holds the trials run so far (a ``TuningResult``), when known."""

    def __init__(self, message: str, result: object | None = None) -> None:
        super().__init__(message)
        self.result = result


class ResourceFailedError(RunFailedError):
    """A launched Kubernetes object (SparkApplication, PyTorchJob, TFJob, TrainJob...) failed.

    The message carries the object's state or conditions and the tail of its primary pod's log.
    """


class ResourceTimeoutError(ResourceFailedError):
    """A launched object did not finish (or become ready) within the step's timeout."""


class DeploymentFailedError(RunFailedError):
    """A deployed model did not serve: its server never became ready, or did not answer a
    request with probabilities."""


class CancelledError(KfstackError):
    """The step got SIGTERM (a cancelled run, a deleted pod); what it started was stopped."""

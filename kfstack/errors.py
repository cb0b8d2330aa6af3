"""One error hierarchy for the project (STYLE 7): callers catch ``KfstackError``.

Raise the most specific class, keep the cause with ``raise ... from err``, and write messages a
person reading a failed pipeline task in the KFP UI can act on.
"""


class KfstackError(Exception):
    """Base class of every error this project raises on purpose."""


class InvalidParameterError(KfstackError, ValueError):
    """A parameter is out of range or inconsistent; raised before anything is submitted."""


class PlatformNotAvailableError(KfstackError):
    """The requested platform cannot run this step (yet); nothing was submitted."""


class DataQualityError(KfstackError):
    """Input data failed validation badly enough that the job refuses to go on."""


class TrainingFailedError(KfstackError):
    """A training process group failed and could not be recovered by restarts."""


class CancelledError(KfstackError):
    """The step got SIGTERM (a cancelled run, a deleted pod); what it started was stopped."""


class ResourceFailedError(KfstackError):
    """A launched Kubernetes object (SparkApplication, PyTorchJob, TFJob...) ended in failure.

    The message carries the object's state or conditions and the tail of its primary pod's log.
    """


class ResourceTimeoutError(ResourceFailedError):
    """A launched object did not finish within the step's timeout; it was deleted."""

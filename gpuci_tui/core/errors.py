"""The errors every part of gpuci-tui raises, apart from the protocols they cross.

`GpuciError` is the root: its message is written for the operator, so the CLI and
the console show it as it is. The Azure and container errors are what the real
clients (and the simulations) raise across `protocols.AgentPoolApi` and
`protocols.ContainerRuntime`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuci_tui.core.protocols import ContainerInfo


class GpuciError(Exception):
    """Base of every error the engine turns into a plain message for the operator.

    `str(error)` is meant to be shown as is: it says what happened and what to do.
    It never contains a secret.
    """


class AzureError(GpuciError):
    """Azure DevOps could not be used."""


class AzureAuthError(AzureError):
    """The PAT was rejected (401, or a 203/HTML sign-in page)."""


class AzureScopeError(AzureError):
    """The PAT is valid but lacks the Agent Pools scope (403 / TF400813 on pools)."""


class AzureNotFoundError(AzureError):
    """A pool or agent does not exist."""


class AzureRateLimitError(AzureError):
    """429, or a rate-limit delay; `retry_after` is in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AzureHeldBackError(AzureError):
    """Not sent: ``[azure] max_requests_per_minute`` is reached for a periodic read.

    The organisation is not at fault (its health stays as it is); the read comes again
    after `retry_after` seconds.
    """

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AzureBadRequestError(AzureError):
    """400: the service refused the request itself (a query it does not take, e.g. a demand)."""


class AzureUnreachableError(AzureError):
    """DNS, connection refused, TLS or timeout: the organisation could not be reached."""


class AzureServerError(AzureError):
    """5xx after retries; `retry_after`: the seconds its ``Retry-After`` asked (None: not said)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RuntimeUnavailableError(GpuciError):
    """The container engine could not be reached (socket missing, permission, down)."""


class ContainerStartError(GpuciError):
    """An agent container could not be created or started (image missing, no GPU runtime…)."""


class ContainerNameConflictError(ContainerStartError):
    """The slot's container name is still taken (the old container is being removed).

    ``holder`` is the container that holds the name, as the engine describes it
    (None: it could not be asked, or the name was freed meanwhile).
    """

    def __init__(self, message: str, holder: ContainerInfo | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class ImageLabelMissingError(ContainerStartError):
    """The image lacks a label the start requires (`ContainerSpec.required_labels`)."""


class ImagePullError(GpuciError):
    """An image could not be pulled, or its registry could not be asked for its digest.

    ``kind`` says whose problem it is: ``auth`` (credentials), ``not_found`` (no such
    image or tag), ``unreachable`` (the registry did not answer), ``disk`` (Docker's
    disk is full or below the hard floor) or ``other``.
    """

    def __init__(self, message: str, kind: str = "other") -> None:
        """A pull failure with its operator message and kind."""
        super().__init__(message)
        self.kind = kind

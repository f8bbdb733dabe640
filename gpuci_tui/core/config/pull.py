"""The image pull settings of an agent group: ``pull`` and ``pull_check_interval``.

GitLab Runner's ``pull_policy`` semantics, which operators already know:
``never`` (the image must be on the host: build or pull it yourself),
``missing`` (pull when the image is not on the host; the default) and ``always``
(ask the registry for the digest behind the tag before a lane starts, and pull
when it differs). "Always" asks at most once per ``pull_check_interval`` per
image: a pool replacing its agent after every job must not query the registry
(and count against its rate limits) for every job.
"""

from __future__ import annotations

from gpuci_tui.core.config.file import ConfigError, show
from gpuci_tui.core.config.validate import suggest

PULL_POLICIES = ("never", "missing", "always")
DEFAULT_PULL = "missing"
DEFAULT_PULL_CHECK_INTERVAL = 300.0
#: Seconds: from once every 10 s (a registry next door) to once a day.
PULL_CHECK_RANGE = (10.0, 86400.0)


def validate_pull(value: object) -> str:
    """Check ``agents.pull``: ``never``, ``missing`` or ``always``.

    Raises:
        ConfigError: with key ``agents.pull``.
    """
    if isinstance(value, str) and value in PULL_POLICIES:
        return value
    hint = suggest(value, PULL_POLICIES).strip() if isinstance(value, str) else ""
    problem = (
        'must be "never" (never pull: the image must be on the host), "missing" (pull when '
        'it is not on the host) or "always" (pull when the registry has a newer digest for '
        f"the tag), got {show(value)}"
    )
    problem += f"; {hint}" if hint else ""
    raise ConfigError(problem, key="agents.pull", allowed=PULL_POLICIES)


def validate_pull_check_interval(value: object) -> float:
    """Check ``agents.pull_check_interval``: seconds between two registry checks of an image.

    Raises:
        ConfigError: with key ``agents.pull_check_interval``.
    """
    low, high = PULL_CHECK_RANGE
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(
            f"must be a number of seconds from {low:g} to {high:g} (how often, at most, "
            'pull = "always" asks the registry whether the tag moved), got '
            f"{show(value)}",
            key="agents.pull_check_interval",
        )
    return float(value)

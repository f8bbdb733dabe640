"""A successful answer of Azure DevOps, as the transport hands it to the endpoints.

`decode_answer` turns a 2xx response into an `Answer` (its JSON decoded, its
continuation token kept); `answer_size` is what the answer cost in bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import requests

from gpuci_tui.core.errors import AzureError

Json = Any
"""A decoded JSON value (dict, list, str, number, bool or None)."""


@dataclass(frozen=True)
class Answer:
    """A successful (2xx) answer."""

    status: int
    body: Json
    """Decoded JSON, or None for an empty body."""
    continuation_token: str | None = None
    """``X-MS-ContinuationToken`` when the resource has more pages."""


def decode_answer(response: requests.Response, method: str, shown: str) -> Answer:
    """The 2xx ``response`` to ``method shown`` as an `Answer`.

    Raises:
        AzureError: The body is not JSON (a wrong organisation URL, most often).
    """
    content = response.content
    body: Json = None
    if content.strip():
        try:
            body = json.loads(content)
        except ValueError:
            raise AzureError(
                f"Azure DevOps answered {method} {shown} with something that is not JSON. "
                "Check that the organisation URL is right (https://dev.azure.com/ORG)."
            ) from None
    return Answer(
        status=response.status_code,
        body=body,
        continuation_token=response.headers.get("X-MS-ContinuationToken") or None,
    )


def answer_size(response: requests.Response) -> int:
    """The bytes of an answer's body (as received; a body that cannot be read counts 0)."""
    try:
        return len(response.content)
    except requests.RequestException:
        return 0

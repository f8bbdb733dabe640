"""Fleet test fixtures: the console tests' pinned time zone."""

from __future__ import annotations

from tests.ui.conftest import _utc  # noqa: F401 - autouse: times render in local time

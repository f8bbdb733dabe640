"""Standby depth: ``standby = N``, ``"auto"`` and the standby schedule."""

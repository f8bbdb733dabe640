"""The supervisor and its loop's parts (executor, background tasks, reconfiguration, slot layout), and agent groups under one daemon."""

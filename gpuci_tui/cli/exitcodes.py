"""Exit codes that scripts can rely on (documented in README "Exit codes")."""

OK = 0
FAILED = 1
"""The command ran and was refused or failed (e.g. unknown slot)."""
USAGE = 2
"""Bad arguments (argparse)."""
NO_DAEMON = 3
"""No daemon is running for this configuration, or it did not answer."""
CONFIG = 4
"""The configuration file is missing or invalid."""
CREDENTIALS = 5
"""No usable PAT (keyring absent/locked, PAT file unreadable, PAT rejected)."""
ALREADY_RUNNING = 6
"""``run``: another daemon supervises the same agents."""
RUNTIME = 7
"""The container engine is unusable (socket missing, permission denied)."""
INTERRUPTED = 130
"""Ctrl-C."""
OUTPUT_CLOSED = 141
"""The reader of standard output went away (``status --json | head``): 128 + SIGPIPE, as
other Unix tools that are killed by SIGPIPE report it, but without a traceback."""

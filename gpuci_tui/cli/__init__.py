"""Command-line entry points (``gpuci-tui …``)."""

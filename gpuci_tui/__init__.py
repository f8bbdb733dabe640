"""gpuci-tui: a console and supervisor for Azure Pipelines agents on GPU hosts."""

__version__ = "0.1.0"

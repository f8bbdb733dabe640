"""What an NVML start-up failure means for the operator, and what to do about it.

Kept apart from the sampler: these are words for people (the console, `status`,
`check-config`), one per NVML error the driver gives when it cannot start.
"""

from __future__ import annotations

import pynvml

__all__ = ["init_failure_reason"]


def init_failure_reason(error: BaseException) -> str:
    """Turn an NVML init failure into what the operator should know and do."""
    value = getattr(error, "value", None)
    if value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return (
            "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver is installed on "
            "this host. Install the NVIDIA driver to monitor and use GPUs."
        )
    if value == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return (
            "The NVIDIA kernel driver is not loaded (nvidia-smi fails too). "
            "Load it (modprobe nvidia) or reboot the host."
        )
    if value == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return (
            "NVIDIA driver/library version mismatch: the driver was upgraded but the old "
            "kernel module is still loaded. Reboot the host (or reload the nvidia modules)."
        )
    if value == pynvml.NVML_ERROR_NO_PERMISSION:
        return (
            "No permission to open the NVIDIA devices (/dev/nvidia*). Run gpuci-tui as a "
            "user who may use the GPUs, or fix the device permissions."
        )
    return f"NVML could not start ({error}). Check that nvidia-smi works on this host."

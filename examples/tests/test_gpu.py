"""GPU smoke tests for a gpuci-tui agent (run by examples/gpu-tests.yml).

They need nothing but the NVIDIA driver the container toolkit mounts into the
job: nvidia-smi and libcuda through ctypes, so they run on a runtime image too.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import pytest


@pytest.fixture(scope="module")
def libcuda() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        pytest.fail(f"libcuda.so.1 not found ({exc}): the job has no GPU driver mounted")
    assert lib.cuInit(0) == 0, "cuInit failed: no usable GPU in this container"
    return lib


def test_nvidia_smi_lists_a_gpu() -> None:
    smi = shutil.which("nvidia-smi")
    assert smi, "nvidia-smi missing: is the NVIDIA Container Toolkit configured on the host?"
    out = subprocess.run([smi, "-L"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("GPU "), out


def test_cuda_driver_sees_devices(libcuda: ctypes.CDLL) -> None:
    count = ctypes.c_int()
    assert libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0
    assert count.value >= 1
    visible = os.environ.get("NVIDIA_VISIBLE_DEVICES", "all")
    if visible not in ("all", "", "void", "none"):
        # gpuci-tui pins each agent to its GPUs: the job sees exactly those.
        assert count.value == len(visible.split(","))


def test_device_has_a_name_and_memory(libcuda: ctypes.CDLL) -> None:
    device = ctypes.c_int()
    assert libcuda.cuDeviceGet(ctypes.byref(device), 0) == 0
    name = ctypes.create_string_buffer(256)
    assert libcuda.cuDeviceGetName(name, 256, device) == 0
    total = ctypes.c_size_t()
    assert libcuda.cuDeviceTotalMem_v2(ctypes.byref(total), device) == 0
    print(f"GPU 0: {name.value.decode()} with {total.value / 2**30:.1f} GiB")
    assert total.value > 1 << 30


def test_driver_supports_the_image_cuda(libcuda: ctypes.CDLL) -> None:
    version = ctypes.c_int()
    assert libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0
    image = os.environ.get("CUDA_VERSION", "")  # set by nvidia/cuda images
    if image:
        major, minor = (int(x) for x in image.split(".")[:2])
        assert (version.value // 1000, (version.value % 1000) // 10) >= (major, minor), (
            f"driver supports CUDA {version.value // 1000}.{(version.value % 1000) // 10}, "
            f"the image is built for {image}: choose an older image tag or update the driver"
        )

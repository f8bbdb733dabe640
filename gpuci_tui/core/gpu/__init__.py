"""The host's GPUs: the NVML sampler, per-process figures, per-job accounting, the configuration-against-host check and the CUDA image choice."""

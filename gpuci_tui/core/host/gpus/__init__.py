"""The host's GPUs around the engine: the sampling loop, the gatekeeper, each slot's GPUs and capabilities, and the CUDA check before every start."""

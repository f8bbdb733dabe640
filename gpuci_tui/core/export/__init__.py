"""`gpuci-tui export kubernetes`: KEDA ScaledJob manifests, a small YAML writer and the NOTES file."""

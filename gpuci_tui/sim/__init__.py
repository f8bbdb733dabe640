"""Simulated Azure DevOps organisation and agent emulator (demo and tests)."""

"""UI-free engine: config, secrets, Azure DevOps, Docker, GPUs and the supervisor.

Nothing in this package may import Textual or Rich (tests/test_import_hygiene.py).
"""

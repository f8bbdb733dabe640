"""The pure engine: slot state, planner, transitions, commands, previews and snapshots. No I/O here (tests/test_core_structure.py holds it to that)."""

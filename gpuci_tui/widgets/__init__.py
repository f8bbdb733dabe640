"""Dashboard panels: header, GPU cards, agents table, pool summary, event log."""

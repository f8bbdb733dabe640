"""The agent's own side: the facts its output lines state, and the start gate it waits at."""

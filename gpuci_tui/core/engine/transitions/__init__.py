"""Transitions: fold one observation into the engine state (pure), by what it is about."""

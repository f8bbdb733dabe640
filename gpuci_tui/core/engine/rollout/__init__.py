"""Roll-outs: a new agent spec going through a group's slots, its state and its views."""

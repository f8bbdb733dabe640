"""The planner: one pure function from the engine state and the time to the next actions, with its rules for running and held slots."""

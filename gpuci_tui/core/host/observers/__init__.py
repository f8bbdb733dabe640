"""What the daemon learns from outside: Docker's containers, the organisation's pool (and our role in it), stale registrations, token files, and finished jobs."""

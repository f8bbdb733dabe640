"""Images and agent packages: pulls, Docker's disk, and the cache and updates of agent packages."""

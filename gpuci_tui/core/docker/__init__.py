"""The Docker side (the real ContainerRuntime): docker-py client, event stream, API mapping, errors, the agent container's spec and exit codes."""

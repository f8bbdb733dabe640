"""The Azure DevOps agent-pool client (the real AgentPoolApi): HTTP transport, parsing, errors and PAT checks."""

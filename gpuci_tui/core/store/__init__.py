"""What is kept across restarts: the job history (SQLite) and its schema, and the operator's intent."""

"""The PAT: where it is stored (OS keyring, encrypted file, environment) and how it is kept out of logs."""

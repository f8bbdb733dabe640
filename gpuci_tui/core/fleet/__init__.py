"""The fleet console's runtime: ssh links to the hosts' daemons, overview rows (``[fleet]``: `config.fleet`)."""

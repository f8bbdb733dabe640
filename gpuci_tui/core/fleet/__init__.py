"""The fleet console: which hosts it watches (config), the ssh links to their daemons and the overview's rows."""

"""The daemon's control socket: its protocol and client, its server, the bounded serving both servers share, logs over the socket, and the other names of the socket."""

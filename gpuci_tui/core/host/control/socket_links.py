"""Other names of a daemon's control socket, so the CLI finds it after the file changed.

The CLI finds a daemon by the instance id of the configuration file
(`cli.common.socket_for`). A reload that adds or removes a group changes that id
while the daemon keeps the socket it bound at start, so two links (symlinks in
the same private runtime directory) lead to it:

* one named after the configuration file itself (`config_link`), made at start:
  ``gpuci-tui reload`` of an edited file still reaches the daemon started from it;
* one named after the instance of the configuration as it runs now, made after
  each reload that changed it: ``status``, ``drain``, ... with the new file work.

A link never replaces a live socket of another daemon, and only our own links
are removed when the daemon stops.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from pathlib import Path

from gpuci_tui.core.config.loader import Config, daemon_instance
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.control.client import socket_alive

__all__ = ["SocketLinks", "config_link"]

log = logging.getLogger("gpuci_tui.daemon")


def config_link(path: Path) -> Path:
    """Where the daemon started from the file ``path`` keeps a link to its socket."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return socket_path(f"config-{digest}")


class SocketLinks:
    """The links to one daemon's socket (see the module)."""

    def __init__(self, target: Path) -> None:
        """Links lead to ``target``, the socket the daemon bound."""
        self.target = target
        self.made: list[Path] = []

    def link(self, path: Path) -> None:
        """Make ``path`` lead to the socket, unless another daemon answers there."""
        if path == self.target or path in self.made:
            return
        try:
            if path.is_symlink() or path.exists():
                if path.resolve() == self.target.resolve():
                    self.made.append(path)
                    return
                if socket_alive(path):
                    log.warning("not linking %s: another daemon answers there", path)
                    return
                path.unlink()
            path.symlink_to(self.target)
        except OSError as exc:
            log.warning("could not link %s to the control socket: %s", path, exc)
            return
        self.made.append(path)

    def at_start(self, config: Config) -> None:
        """The link named after the file the daemon was started from."""
        if config.path is not None:
            with contextlib.suppress(GpuciError):
                self.link(config_link(config.path))

    def follow(self, config: Config) -> None:
        """After a reload: the link named after the instance of ``config`` as it runs now."""
        with contextlib.suppress(GpuciError):
            self.link(socket_path(daemon_instance(config)))

    def close(self) -> None:
        """Remove the links still leading to our socket."""
        for path in self.made:
            with contextlib.suppress(OSError):
                if path.is_symlink() and path.resolve() == self.target.resolve():
                    path.unlink()
        self.made.clear()

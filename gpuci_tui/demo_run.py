"""How ``gpuci-tui demo`` runs: a real daemon on the demo's instance, its console, a clean end.

The demo's daemon is `serve`, the daemon of ``gpuci-tui run``, on the demo's own
instance (`demo_instance`): the same assembly, control socket, links and reload.
It runs in a thread of the demo's process, on its own event loop, because the
simulated organisation, runtime and GPUs live in this process. The console
attaches to its socket as ``gpuci-tui`` attaches to a daemon (`SocketHandle`),
and so does any command from another shell (``--no-console``: the daemon alone,
in the foreground, for trying the command line).

The demo ends when its console quits, when its daemon stops (``gpuci-tui
stop``), or on SIGINT, SIGTERM or SIGHUP (a closed terminal): the main thread's
handlers (`Ending`) end the console, then the daemon, and
`demo.DemoEnvironment.close` removes what the demo made. Signals that arrive
during that clean-up are ignored: a second Ctrl+C cannot leave half of it behind.
A console that has not quit `QUIT_GRACE` seconds after a signal (a closed
terminal can hang Textual's shutdown) is not waited for: the clean-up runs
without it, and the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.errors import GpuciError

if TYPE_CHECKING:
    from gpuci_tui.core.host.control.server import ControlServer
    from gpuci_tui.core.host.handle import Supervised, SupervisorHandle
    from gpuci_tui.core.host.instance import DaemonPaths
    from gpuci_tui.demo import DemoEnvironment

__all__ = ["DemoDaemon", "DemoSession", "Ending"]

DAEMON_START_TIMEOUT = 30.0
DAEMON_STOP_TIMEOUT = 30.0
QUIT_GRACE = 5.0
"""Seconds the console has to quit after a signal before the demo cleans up without it.

A closed terminal (SIGHUP) can leave Textual's shutdown waiting for ever on a writer
thread that died on the lost terminal: the clean-up must not wait for it."""
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Ending:
    """SIGINT, SIGTERM and SIGHUP end the demo, whatever it is doing (a context manager).

    While the demo starts, a signal unwinds it (`KeyboardInterrupt`; what was
    started is undone on the way). Once it runs, a signal calls the stop that
    `on_signal` set (end the console, or the daemon). Once ``closing``, signals
    are noted and do nothing: the clean-up runs to its end.
    """

    def __init__(self) -> None:
        """Not installed yet (see `__enter__`)."""
        self.signal: int | None = None
        """The signal that ended the demo (None: it ended otherwise)."""
        self.closing = False
        """The clean-up has begun (set from any thread)."""
        self._stop: Callable[[], None] | None = None
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> Ending:
        """Install the handlers (the previous ones come back at the end)."""
        for sig in SIGNALS:
            self._saved[sig] = signal.signal(sig, self._received)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Put the previous handlers back."""
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def on_signal(self, stop: Callable[[], None]) -> None:
        """From now on a signal calls ``stop`` (at once when one came already)."""
        self._stop = stop
        if self.signal is not None:
            stop()

    @property
    def exit_code(self) -> int:
        """128 + the signal that ended the demo, as a shell reports it."""
        return 128 + (self.signal or signal.SIGINT)

    def _received(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is None:
            self.signal = signum
        if self.closing:
            return
        if self._stop is None:
            raise KeyboardInterrupt
        self._stop()


class DemoDaemon:
    """`serve` on the demo's instance, in a thread with its own event loop."""

    def __init__(self, env: DemoEnvironment, paths: DaemonPaths) -> None:
        """The daemon of ``env`` on the instance files ``paths`` (not started yet)."""
        self.env = env
        self.paths = paths
        self.ready = threading.Event()
        """Set once the control socket answers."""
        self.done = threading.Event()
        """Set once `serve` returned (or failed: `error`)."""
        self.error: BaseException | None = None
        self.on_end: Callable[[], None] = lambda: None
        """Called in the daemon's thread when it ended (the console quits then)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._supervisor: Supervised | None = None
        self._thread = threading.Thread(target=self._run, name="demo-daemon", daemon=True)

    def start(self, timeout: float = DAEMON_START_TIMEOUT) -> None:
        """Start the daemon and wait until its socket answers.

        Raises:
            GpuciError: it failed (why) or did not answer in time.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.1):  # short waits: a signal's handler runs between them
            if self.done.is_set():
                raise GpuciError(f"the demo's daemon did not start: {self.error}")
            if time.monotonic() > deadline:
                raise GpuciError(f"the demo's daemon did not answer within {timeout:g} s")

    def stop(self, timeout: float = DAEMON_STOP_TIMEOUT) -> bool:
        """Ask the daemon to stop (agents left to the clean-up) and wait; False: still running."""
        if not self._thread.is_alive():
            return True
        # Stopped while starting: it can be asked once it serves.
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.1) and not self.done.is_set():
            if time.monotonic() > deadline:
                return False
        self.stop_soon()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()

    def stop_soon(self) -> None:
        """Ask the daemon to stop, without waiting (from a signal's handler, too)."""
        loop, supervisor = self._loop, self._supervisor
        if loop is not None and supervisor is not None:
            soon(loop, supervisor.request_stop, False)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - said by `start`, or after the console
            self.error = exc
        finally:
            self.done.set()
            self.on_end()

    async def _serve(self) -> None:
        from gpuci_tui.core.host.daemon import serve

        env = self.env
        await serve(
            env.config,
            api=env.api,
            runtime=env.runtime,
            tokens=env.daemon_tokens,
            paths=self.paths,
            extra_labels=env.extra_labels,
            ready=self._ready,
            gpu=env.gpu,
            signals=False,  # only the main thread takes signals: `Ending` there
        )

    def _ready(self, supervisor: Supervised, server: ControlServer) -> None:
        from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor

        self._loop = asyncio.get_running_loop()
        self._supervisor = supervisor
        if isinstance(supervisor, GroupSupervisor):
            self.env.supervisor_holder[:] = [supervisor]  # the synthetic GPUs read it
        self.ready.set()


def soon(loop: asyncio.AbstractEventLoop, action: Callable[..., object], *args: object) -> None:
    """Run ``action`` on ``loop`` from any thread; nothing when the loop has closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(action, *args)


class DemoSession:
    """One run of the demo on a built `DemoEnvironment`: `run`, then always `finish`."""

    def __init__(
        self, env: DemoEnvironment, ending: Ending, say: Callable[[str], None] = print
    ) -> None:
        """Run ``env``'s daemon (and console); ``ending`` takes the signals; ``say`` prints."""
        from gpuci_tui.core.config.loader import daemon_instance
        from gpuci_tui.core.host.instance import DaemonPaths

        self.env = env
        self.ending = ending
        self.say = say
        # This process uses the demo's instance (`DemoInstance.enter`): the standard files.
        self.daemon = DemoDaemon(env, DaemonPaths.for_instance(daemon_instance(env.config)))
        self._finishing = threading.Lock()
        self._finished = False
        self._grace: threading.Timer | None = None

    def run(self, *, console: bool, readonly: bool = False) -> None:
        """Run the daemon, and the console unless not ``console``, until the demo ends.

        Raises:
            GpuciError: the daemon did not start.
            KeyboardInterrupt: a signal came while it started.
        """
        env, daemon = self.env, self.daemon
        env.seed(daemon.paths.history)
        env.store_secrets()
        daemon.start()
        env.instance.publish(env.notes())  # from now on other shells reach the demo
        self.say(env.instance.how_to_reach())
        if console:
            self.ending.on_signal(lambda: None)  # noted; the console quits once it runs
            self._console(readonly)
            return
        self.ending.on_signal(daemon.stop_soon)
        self.say("The daemon runs in the foreground: Ctrl+C (or `gpuci-tui stop`) ends the demo.")
        while not daemon.done.wait(0.5):  # short waits: a signal's handler runs between them
            pass

    def finish(self) -> None:
        """Stop the daemon and remove everything the demo made; once, from any thread."""
        if self._grace is not None:
            self._grace.cancel()  # the console quit in time: the clean-up is done here
        with self._finishing:
            if self._finished:
                return
            self._finished = True
            self.ending.closing = True
            daemon = self.daemon
            try:
                stopped = daemon.stop()
                if daemon.error is not None and daemon.ready.is_set():
                    self._say(f"gpuci-tui demo: the daemon failed: {daemon.error}")
                if not stopped:
                    self._say("gpuci-tui demo: the daemon did not stop in time; cleaning up anyway")
            finally:
                self.env.close()
            self._say(
                f"gpuci-tui demo: ended; removed {self.env.instance.root} and everything "
                "the demo made."
            )

    def _say(self, text: str) -> None:
        # After SIGHUP the terminal is gone: nobody reads it any more.
        with contextlib.suppress(OSError):
            self.say(text)

    def _quit_or_finish(self, loop: asyncio.AbstractEventLoop, app: Any) -> None:
        """A signal: quit the console; clean up without it if it has not quit in time."""
        soon(loop, app.exit)
        if self._grace is None:
            self._grace = threading.Timer(QUIT_GRACE, self._finish_and_exit)
            self._grace.daemon = True  # the normal end does not wait for it
            self._grace.start()

    def _finish_and_exit(self) -> None:
        self.finish()
        os._exit(self.ending.exit_code)  # the console's thread may never return

    def _console(self, readonly: bool) -> None:
        """The console on the daemon's socket, until it quits (or the demo ends)."""
        from gpuci_tui.app import make_app
        from gpuci_tui.core.config.loader import Config
        from gpuci_tui.core.host.control.client import SocketHandle

        env, daemon = self.env, self.daemon

        async def attach(config: Config) -> SupervisorHandle:
            # On the console's loop: from here on a signal, or the daemon's end, quits it.
            loop = asyncio.get_running_loop()
            self.ending.on_signal(lambda: self._quit_or_finish(loop, app))
            daemon.on_end = lambda: soon(loop, app.exit)
            if daemon.done.is_set():
                app.exit()
            app.notify(
                f"Try the command line from another shell: "
                f"gpuci-tui --config {env.instance.config_path} status",
                title="Demo",
                timeout=30,
                markup=False,
            )
            return SocketHandle(daemon.paths.socket)

        app = make_app(env.console_services(attach, daemon.paths.history, readonly=readonly))
        app.run()

"""The real container runtime: agent containers on the local Docker engine (docker-py).

`DockerRuntime` implements `ContainerRuntime` on docker-py's low-level
`APIClient`, because the high-level helpers do things a shared GPU host must
not: ``containers.run/create`` pull a missing image from a registry, and
``containers.list`` inspects every container after listing it (which fails
with 404 when a container is removed in between). The PAT reaches
a container only as a file copied in with ``put_archive`` before it starts, so
it is in no ``docker inspect`` output, argv or environment.

Docker's answers are turned into plain messages by `errors`; the
translation of specs and JSON lives in `mapping`; the event stream
follower in `events`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import docker
import docker.errors

from gpuci_tui.core.docker.client import EngineConnection
from gpuci_tui.core.docker.disk import EngineDisk
from gpuci_tui.core.docker.errors import (
    ContainerOperationError,
    api_explanation,
    image_missing,
    is_engine_failure,
    start_failure,
)
from gpuci_tui.core.docker.events import EVENT_ACTIONS, follow_events
from gpuci_tui.core.docker.files import put_file, remove_file
from gpuci_tui.core.docker.image_reader import ImageReader
from gpuci_tui.core.docker.images import repo_digest_for
from gpuci_tui.core.docker.leftovers import discard, holder_of, reclaim_half_made
from gpuci_tui.core.docker.mapping import (
    host_config_kwargs,
    info_from_inspect,
    info_from_summary,
    token_archive,
)
from gpuci_tui.core.docker.output import OpenStreams, lines_of
from gpuci_tui.core.docker.registry import EngineRegistry
from gpuci_tui.core.errors import (
    ContainerNameConflictError,
    ContainerStartError,
    ImageLabelMissingError,
    RuntimeUnavailableError,
)
from gpuci_tui.core.protocols import ContainerEvent, ContainerInfo, ContainerSpec, ImageConfig
from gpuci_tui.core.secrets.redaction import redact

__all__ = ["ContainerOperationError", "DockerRuntime"]

log = logging.getLogger("gpuci_tui.runtime")

_DETAIL_CACHE_SIZE = 512


def _label_filters(labels: Mapping[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in labels.items()]


class DockerRuntime:
    """`ContainerRuntime` on a Docker engine, through docker-py.

    Args:
        client: A docker-py `DockerClient` to use (its API calls are counted from
            now on; `close` undoes that but does not close it).
        base_url: The engine's address (``unix:///var/run/docker.sock``,
            ``tcp://host:2376``); default: ``DOCKER_HOST``, else the local socket.
        timeout: Seconds to wait for the engine's answer to one call.

    The client is created on first use, so constructing a runtime never fails;
    `ping` says whether (and why not) the engine can be used. All methods are
    blocking and safe to call from several threads at once.
    """

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        base_url: str | None = None,
        timeout: float = 30,
    ) -> None:
        self._conn = EngineConnection(client, base_url=base_url, timeout=timeout)
        self._disk = EngineDisk(self._conn)
        self._lock = threading.Lock()
        # Container id -> last inspected details, reused while the state is the
        # same (a running container's start time, an exited one's exit code/OOM).
        self._details: OrderedDict[str, ContainerInfo] = OrderedDict()
        self._images = ImageReader(self._conn)
        self._registry = EngineRegistry(self._conn, self._images)
        self._streams = OpenStreams()

    @property
    def disk(self) -> EngineDisk:
        """The engine's data root and images (`DockerDisk`), on this runtime's connection."""
        return self._disk

    @property
    def registry(self) -> EngineRegistry:
        """Pulls and registry digests (`ImageRegistry`), on this runtime's connection."""
        return self._registry

    @property
    def api_call_count(self) -> int:
        """How many Docker API requests this runtime has made."""
        return self._conn.call_count

    def close(self) -> None:
        """Stop counting on an injected client; close the client this runtime created."""
        self._conn.close()

    def _remember(self, info: ContainerInfo) -> None:
        with self._lock:
            self._details[info.id] = info
            self._details.move_to_end(info.id)
            while len(self._details) > _DETAIL_CACHE_SIZE:
                self._details.popitem(last=False)

    def _forget(self, container_id: str) -> None:
        with self._lock:
            self._details.pop(container_id, None)

    # ------------------------------------------------------------------ protocol

    def ping(self) -> None:
        """Raise RuntimeUnavailableError with a plain message when the engine is unusable."""
        with self._conn.api() as api:
            try:
                ok = api.ping()
            except docker.errors.APIError as exc:
                raise RuntimeUnavailableError(
                    f"Docker engine at {self._conn.endpoint.describe()} answered the health check "
                    f"with an error: {api_explanation(exc)}. Check `docker info`."
                ) from exc
        if not ok:
            raise RuntimeUnavailableError(
                f"Docker engine at {self._conn.endpoint.describe()} gave an unexpected answer to "
                "the health check. Check `docker info`."
            )

    def image_present(self, image: str) -> bool:
        """Whether ``image`` is present locally (an inspect; never pulls)."""
        return self._images.inspect(image) is not None

    def image_config(self, image: str) -> ImageConfig | None:
        """The image's id, environment and labels in one inspect (None when not present)."""
        return self._images.config(image)

    def start(self, spec: ContainerSpec, token: str) -> ContainerInfo:
        """Create the container, copy the token file into it, start it.

        The token goes in as ``spec.token_path`` (directory 0700, file 0600, owned
        by root) through an in-memory tar; it is never in the container's
        configuration. A container that was created but could not be started is
        force-removed so that it does not keep the slot's name; one that could not
        be removed then is removed by the next start of the name (`leftovers`).

        Raises:
            ContainerNameConflictError: the name is still taken.
            ContainerStartError: with a plain reason (image missing, no GPU runtime…).
            RuntimeUnavailableError: the engine cannot be reached.
        """
        self._check_secret_free(spec, token)
        try:
            archive = token_archive(spec.token_path, token)
        except ValueError as exc:
            raise ContainerStartError(f"Cannot start {spec.name}: {exc}") from exc
        # The presence check reads the image anyway: its id and digests come with it.
        image_data = self._images.inspect(spec.image)
        if image_data is None:
            raise image_missing(spec.image)
        image_labels = dict((image_data.get("Config") or {}).get("Labels") or {})
        for key, value in spec.required_labels.items():
            if image_labels.get(key) != value:
                raise ImageLabelMissingError(
                    f"The image {spec.image} has no label {key}={value}, which this start "
                    "needs (its start.sh must wait for the daemon's go); nothing was created."
                )
        image_id = self._images.keep(image_data)
        repo_digest = repo_digest_for(spec.image, image_data.get("RepoDigests") or ())
        with self._conn.api() as api:
            try:
                host_config = api.create_host_config(**host_config_kwargs(spec))
            except (ValueError, docker.errors.DockerException) as exc:
                raise ContainerStartError(
                    f"Invalid container settings for {spec.name}: {exc}"
                ) from exc
            create = {
                "image": spec.image,
                "command": list(spec.command) if spec.command else None,
                "name": spec.name,
                "labels": dict(spec.labels),
                "environment": dict(spec.environment),
                "host_config": host_config,
                "detach": True,
            }
            try:
                try:
                    created = api.create_container(**create)
                except docker.errors.APIError as exc:
                    # A half-made container of an earlier start may hold the name.
                    if exc.status_code != 409 or not reclaim_half_made(api, spec.name, spec.labels):
                        raise
                    created = api.create_container(**create)
            except docker.errors.APIError as exc:
                error = start_failure(exc, name=spec.name, image=spec.image, stage="create")
                if isinstance(error, ContainerNameConflictError):
                    error.holder = holder_of(api, spec.name)  # whose: the engine's question
                raise error from exc
            container_id = str(created["Id"])
            for warning in created.get("Warnings") or []:
                log.warning("Docker warning for %s: %s", spec.name, warning)
            stage = "copy"
            try:
                if not api.put_archive(container_id, "/", archive):
                    raise ContainerStartError(
                        f"Docker did not accept the token file for {spec.name}; try again."
                    )
                stage = "start"
                api.start(container_id)
            except BaseException as exc:
                discard(api, container_id, spec.name)
                if isinstance(exc, docker.errors.APIError):
                    error = start_failure(exc, name=spec.name, image=spec.image, stage=stage)
                    raise type(error)(redact(str(error), token)) from exc
                raise
        info = ContainerInfo(
            id=container_id,
            name=spec.name,
            labels={**image_labels, **spec.labels},  # as Docker shows them on the container
            status="running",
            image=spec.image,
            started_at=time.time(),
            image_id=image_id,
            repo_digest=repo_digest,
        )
        self._remember(info)
        log.info("started %s (%s) from %s", spec.name, container_id[:12], spec.image)
        return info

    @staticmethod
    def _check_secret_free(spec: ContainerSpec, token: str) -> None:
        """Refuse a spec that would put the PAT where `docker inspect` shows it."""
        if not token.strip():
            raise ContainerStartError(
                f"Cannot start {spec.name}: the PAT is empty. Store it again (gpuci-tui setup)."
            )
        places = [f"environment variable {k}" for k, v in spec.environment.items() if token in v]
        places += [f"label {k}" for k, v in spec.labels.items() if token in v]
        if spec.command and any(token in part for part in spec.command):
            places.append("the command")
        if places:
            raise ContainerStartError(
                f"Refusing to start {spec.name}: the PAT would be visible in docker inspect "
                f"({', '.join(places)}). It is delivered only as the token file."
            )

    def list_containers(self, labels: Mapping[str, str]) -> list[ContainerInfo]:
        """Containers (running or not) that carry all of ``labels``.

        One list call; a container is inspected only when its details are not
        known yet (start time of a running one, exit code and OOM flag of an
        exited one). A container that vanishes in between keeps its list entry.
        """
        filters = {"label": _label_filters(labels)} if labels else None
        with self._conn.api() as api:
            items: list[dict[str, Any]] = api.containers(all=True, filters=filters)
        result: list[ContainerInfo] = []
        for item in items:
            summary = info_from_summary(item)
            result.append(self._images.with_repo_digest(self._with_details(summary)))
        return result

    def _with_details(self, summary: ContainerInfo) -> ContainerInfo:
        if summary.status not in ("running", "exited", "dead"):
            return summary
        with self._lock:
            known = self._details.get(summary.id)
        if known is None or known.status != summary.status:
            known = self.inspect(summary.id)
            if known is None:
                return summary
        return replace(
            summary,
            # The list's "Image" turns into the image id once the tag has moved on;
            # the container's own config keeps the reference it was created from.
            image=known.image or summary.image,
            image_id=summary.image_id or known.image_id,
            started_at=known.started_at,
            exit_code=summary.exit_code if known.exit_code is None else known.exit_code,
            oom_killed=known.oom_killed,
        )

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """The container's current details, or None when it does not exist."""
        with self._conn.api() as api:
            try:
                data = api.inspect_container(container_id)
            except docker.errors.NotFound:
                self._forget(container_id)
                return None
            except docker.errors.APIError as exc:
                raise ContainerOperationError(
                    f"Docker could not inspect container {container_id[:12]}: "
                    f"{api_explanation(exc)}"
                ) from exc
        info = info_from_inspect(data)
        self._remember(info)
        return info

    def stop(self, container_id: str, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; a gone container is not an error."""
        seconds = max(0, math.ceil(timeout))
        with self._conn.api() as api:
            try:
                api.stop(container_id, timeout=seconds)
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                raise ContainerOperationError(
                    f"Docker could not stop container {container_id[:12]}: {api_explanation(exc)}"
                ) from exc

    def remove(self, container_id: str) -> None:
        """Force-remove; a gone container (or one already being removed) is not an error."""
        with self._conn.api() as api:
            try:
                api.remove_container(container_id, force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                explanation = api_explanation(exc)
                if exc.status_code != 409 or "already in progress" not in explanation:
                    raise ContainerOperationError(
                        f"Docker could not remove container {container_id[:12]}: {explanation}"
                    ) from exc
        self._forget(container_id)

    def remove_file(self, container_id: str, path: str) -> bool:
        """Empty ``path`` in a container and verify it holds nothing (see `files.remove_file`)."""
        with self._conn.api() as api:
            return remove_file(api, container_id, path)

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        """The last ``lines`` lines of the container's output ([] when gone)."""
        if lines <= 0:
            return []
        with self._conn.api() as api:
            try:
                raw = api.logs(container_id, stdout=True, stderr=True, tail=lines)
            except docker.errors.NotFound:
                return []
            except docker.errors.APIError as exc:
                if exc.status_code == 409:  # being removed
                    return []
                raise ContainerOperationError(
                    f"Docker could not read the logs of {container_id[:12]}: {api_explanation(exc)}"
                ) from exc
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        return text.rstrip("\r\n").splitlines() if text.strip("\r\n") else []

    def follow_output(self, container_id: str, stop: threading.Event) -> Iterator[str]:
        """The container's output lines from its start, as they come (`output.lines_of`).

        Ends when the container ends, or when ``stop`` is set (the stream is closed
        within `output.CLOSE_POLL`).

        Raises:
            ContainerOperationError: the engine broke the stream (or refused it).
        """
        try:
            with self._conn.api() as api:
                stream = api.logs(container_id, stdout=True, stderr=True, stream=True, follow=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            raise ContainerOperationError(
                f"Docker could not follow the output of {container_id[:12]}: {api_explanation(exc)}"
            ) from exc
        token = self._streams.add(stop, stream)
        try:
            yield from lines_of(stream, stop)
        except Exception as exc:
            if not stop.is_set():  # closed on stop is the normal end; anything else broke
                raise ContainerOperationError(
                    f"the output stream of {container_id[:12]} broke: {exc}"
                ) from exc
        finally:
            self._streams.remove(token)

    def put_file(self, container_id: str, path: str, content: str) -> None:
        """Write a root-only file into a running container (see `files.put_file`)."""
        with self._conn.api() as api:
            put_file(api, container_id, path, content)

    def events(
        self,
        labels: Mapping[str, str],
        stop: threading.Event,
        *,
        since: float | None = None,
    ) -> Iterator[ContainerEvent]:
        """Yield container events for ``labels`` until ``stop`` is set (within ~0.1 s).

        Args:
            labels: Only containers carrying all of these.
            stop: Set it to end the iteration.
            since: Replay events from this Unix time first (use the time of the
                `list_containers` call the caller adopted from, so nothing falls
                into the gap between the two).

        Yields:
            Docker's events (``create``, ``start``, ``die`` with ``exit_code``,
            ``oom``, ``kill``, ``stop``, ``destroy``, …) and ``stream-lost`` /
            ``stream-restored`` around an engine outage (see `follow_events`).
        """
        filters: dict[str, Any] = {"type": "container", "event": list(EVENT_ACTIONS)}
        if labels:
            filters["label"] = _label_filters(labels)

        def open_stream(since_arg: float | None) -> Iterable[Mapping[str, Any]]:
            client = self._conn.client()
            kwargs: dict[str, Any] = {"decode": True, "filters": filters}
            if since_arg is not None:
                kwargs["since"] = f"{since_arg:.6f}"
            stream: Iterable[Mapping[str, Any]] = client.events(**kwargs)
            return stream

        return follow_events(open_stream, stop, describe=self._describe, since=since)

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, RuntimeUnavailableError) or is_engine_failure(exc):
            return str(self._conn.unavailable(exc))
        if isinstance(exc, docker.errors.APIError):
            return f"Docker refused the event stream: {api_explanation(exc)}"
        return f"{exc.__class__.__name__}: {exc}"

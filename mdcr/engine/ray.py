"""The Ray engine: units of work as calls on Ray actors; Ray schedules, restarts, retries.

Nothing here schedules: :meth:`RayEngine.map` starts one actor per CPU slot (or per GPU)
of the cluster, no more than there are units (fewer units share the CPUs out; a GPU actor
gets its share of its node's CPUs, for the threads that tokenize its input), each
building the stage's state once (``setup``: a model, open files), and hands
the units to ``ray.util.ActorPool``. Within a pipeline run, a stage keeps its actors for
the next stage (:func:`mdcr.core.stage.keep_for_run`), which uses them if it asks for the
same CPUs, GPUs and environment (else they are stopped first), so a run of several stages
starts its worker processes (Ray, torch, the JVM) once; they stop when the run ends. An
actor whose process dies is restarted by Ray (``max_restarts``) and the call it was running
is retried (``max_task_retries``); a unit that fails with an mdcr error (bad input) fails
the stage at once, with that one line.

The store must sit on storage every node reaches: before it maps, the engine writes a
marker into each folder the workers use and runs a probe task on every node
(``NodeAffinitySchedulingStrategy``) that reads it back.

Connecting: ``ray_address`` (``--ray-address``), else ``$RAY_ADDRESS``, else a Ray
instance started here with ``ray_workers`` CPUs (all cores when 0). One connection per
process; later stages reuse it. An address must answer as a Ray head within
``$MDCR_RAY_CONNECT_TIMEOUT`` seconds (60 by default), else a one-line error names it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mdcr.core.errors import ConfigError, MdcrError, require
from mdcr.core.stage import keep_for_run, take_kept

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

# Restarts of a dead actor, and retries of the call it was running.
MAX_RETRIES = 3
# The name under which a stage keeps its workers for the next stage of the run.
_KEPT_WORKERS = "ray-workers"
# Seconds a Ray address may take to answer ($MDCR_RAY_CONNECT_TIMEOUT): ray.init itself
# retries an address that does not answer for many minutes.
CONNECT_TIMEOUT_S = 60.0
# The HTTP/2 client greeting and an empty SETTINGS frame; a gRPC server's first frame
# back is SETTINGS (frame type 4 at byte 3 of its 9-byte header).
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_SETTINGS = 4
# Environment the workers need as the driver has it (on other nodes they have their own).
_FORWARD = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "TOKENIZERS_PARALLELISM",
    "NUMBA_CACHE_DIR",
)
# Of those, the paths: made absolute, since a worker's working folder is not the driver's.
_PATHS = ("MDCR_HOME", "HF_HOME", "HF_HUB_CACHE", "NUMBA_CACHE_DIR")


def worker_env() -> dict[str, str]:
    """``MDCR_*`` and the Hugging Face and Numba variables of this process, paths absolute."""
    env = {k: v for k, v in os.environ.items() if k.startswith("MDCR_") or k in _FORWARD}
    for key in _PATHS:
        if key in env:
            env[key] = os.path.abspath(os.path.expanduser(env[key]))
    return env


class _Worker:
    """A Ray actor that runs units of work; each call names the stage's ``setup`` and its
    key, and the state is built once per key (the first call of a stage, and again after
    Ray restarted the actor), so the actor serves the next stage of the same run too.

    An mdcr error in ``setup`` is kept and raised by every call of that key, so it reaches
    the driver as that error (one line), not as a dead actor.
    """

    def __init__(self) -> None:
        self.key: str | None = None
        self.state: Any = None
        self.error: MdcrError | None = None

    def run(
        self, key: str, setup: Callable[[], Any], fn: Callable[[Any, Any], Any], item: Any
    ) -> Any:
        if key != self.key:
            self.state = self.error = None  # the last stage's state (a model) goes first
            try:
                self.state = setup()
            except MdcrError as exc:
                self.error = exc
            self.key = key
        if self.error is not None:
            raise self.error
        return fn(self.state, item)


def gpu_worker_cpus(nodes: Sequence[dict[str, Any]], gpus: float) -> int:
    """CPUs for each worker that uses ``gpus`` GPUs: a node's CPUs shared out among the
    GPU workers it holds, the least over the alive nodes with GPUs, at least 1. An encode
    worker tokenizes on that many threads, so that its GPU is not starved of input."""
    shares = []
    for node in nodes:
        res = node.get("Resources", {}) if node.get("Alive") else {}
        fit = int(res.get("GPU", 0) // gpus)
        if fit:
            shares.append(int(res.get("CPU", 0)) // fit)
    return max(1, min(shares)) if shares else 1


def probe(markers: Sequence[str], token: str, reads: Sequence[str] = ()) -> list[str]:
    """The markers this process cannot read back with ``token`` in them, and the input
    paths it cannot see at all."""
    bad = []
    for marker in markers:
        try:
            ok = Path(marker).read_text() == token
        except OSError:
            ok = False
        if not ok:
            bad.append(marker)
    bad += [path for path in reads if not Path(path).exists()]
    return bad


def unreachable_error(node: str, path: str) -> ConfigError:
    where = Path(path).parent if Path(path).name.startswith(".ray-check-") else Path(path)
    return ConfigError(
        f"Ray node {node} cannot see '{where}': the store and the inputs must be on storage "
        "every node mounts at the same path; put the store (--home, MDCR_HOME) on a shared "
        "file system (NFS, ...) or use --engine local"
    )


class RayEngine:
    """Maps units of work over Ray actors; see the module docstring."""

    name = "ray"
    in_process = False

    def __init__(self, ray: Any, workers: int, address: str) -> None:
        self._ray = ray
        self._workers = workers
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        resources = ray.cluster_resources()
        self._info: dict[str, Any] = {
            "name": self.name,
            "address": address or "local instance",
            "nodes": len(nodes),
            "cpus": int(resources.get("CPU", 0)),
            "gpus": int(resources.get("GPU", 0)),
            "workers": 0,
        }

    def info(self) -> dict[str, Any]:
        return self._info

    def slots(self, gpus: float = 0.0) -> int:
        """Workers to start: ``ray_workers``, else one per CPU (per ``gpus`` GPUs)."""
        if self._workers:
            return self._workers
        resources = self._ray.cluster_resources()
        if gpus:
            return max(1, int(resources.get("GPU", 0) / gpus))
        return max(1, int(resources.get("CPU", 1)))

    def cpus_per_worker(self, n: int) -> int:
        """CPUs for each of ``n`` CPU workers: the cluster's CPUs shared out when there are
        fewer units than CPUs (``ray_workers`` unset), as long as every worker still fits
        on a node; Ray sets each worker's ``OMP_NUM_THREADS`` (torch's threads) to it."""
        if self._workers:
            return 1
        per_node = [
            int(node.get("Resources", {}).get("CPU", 0))
            for node in self._ray.nodes()
            if node.get("Alive")
        ]
        cpus = max(1, sum(per_node) // max(n, 1))
        while cpus > 1 and sum(c // cpus for c in per_node) < n:
            cpus -= 1
        return cpus

    def worker_cpus(self, gpus: float) -> int:
        """CPUs for each worker that uses ``gpus`` GPUs (:func:`gpu_worker_cpus`)."""
        return gpu_worker_cpus(self._ray.nodes(), gpus) if gpus else 1

    def worker_gpus(self, device: str) -> float:
        """GPUs per worker for a stage whose device setting is ``device``: one where the
        cluster has GPUs and the device is not the CPU, else none."""
        if str(device) == "cpu" or not self._info["gpus"]:
            return 0.0
        return 1.0

    def check_shared(self, folders: Sequence[Path], reads: Sequence[Path] = ()) -> None:
        """A one-line error unless every alive node reads what this process writes into
        ``folders`` and sees the inputs ``reads``."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        token = uuid.uuid4().hex
        markers: list[Path] = []
        try:
            for folder in folders:
                folder = Path(folder).resolve()
                folder.mkdir(parents=True, exist_ok=True)
                marker = folder / f".ray-check-{token}"
                marker.write_text(token)
                markers.append(marker)
            task = ray.remote(probe)
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            refs = [
                task.options(
                    num_cpus=0,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
                ).remote([str(m) for m in markers], token, [str(Path(p).resolve()) for p in reads])
                for n in nodes
            ]
            for node, bad in zip(nodes, ray.get(refs), strict=True):
                if bad:
                    raise unreachable_error(str(node.get("NodeManagerAddress")), bad[0])
        finally:
            for marker in markers:
                marker.unlink(missing_ok=True)

    def map(
        self,
        fn: Callable[[S, T], R],
        items: Sequence[T],
        *,
        setup: Callable[[], S],
        gpus: float = 0.0,
    ) -> Iterator[R]:
        if not items:
            return
        ray = self._ray
        from ray.util import ActorPool

        n = max(1, min(len(items), self.slots(gpus)))
        options = {
            "num_cpus": self.worker_cpus(gpus) if gpus else self.cpus_per_worker(n),
            "num_gpus": gpus,
            "runtime_env": {"env_vars": worker_env()},
        }
        actors = self._workers_for(n, options)
        key = uuid.uuid4().hex
        self._info["workers"] = max(self._info["workers"], min(n, len(actors)))
        pool = ActorPool(actors)
        kept = False
        try:
            yield from pool.map(
                lambda actor, item: actor.run.remote(key, setup, fn, item), list(items)
            )
            kept = keep_for_run(_KEPT_WORKERS, (actors, options), lambda held: _stop(ray, held[0]))
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, MdcrError):
                raise exc.cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            raise MdcrError(
                f"a Ray worker died more than {MAX_RETRIES} times ({type(exc).__name__}); "
                "finished work is kept: check the workers' memory and logs, then re-run to "
                "resume"
            ) from None
        finally:
            if not kept:
                _stop(ray, actors)

    def _workers_for(self, n: int, options: dict[str, Any]) -> list[Any]:
        """``n`` workers with ``options``: those an earlier stage of this run kept, where
        they were started with the same options, and new ones for the rest. Kept workers
        with other options are stopped first: they hold the cluster's CPUs and GPUs."""
        ray = self._ray
        actors: list[Any] = []
        kept = take_kept(_KEPT_WORKERS)
        if kept is not None:
            held, held_options = kept
            if held_options == options:
                actors = held
            else:
                _stop(ray, held)
        worker = ray.remote(_Worker).options(
            **options, max_restarts=MAX_RETRIES, max_task_retries=MAX_RETRIES
        )
        return actors + [worker.remote() for _ in range(n - len(actors))]


def _stop(ray: Any, actors: Sequence[Any]) -> None:
    for actor in actors:
        ray.kill(actor)


def connect_timeout() -> float:
    """Seconds to wait for a Ray cluster to answer: ``$MDCR_RAY_CONNECT_TIMEOUT``, else 60."""
    raw = os.environ.get("MDCR_RAY_CONNECT_TIMEOUT", "").strip()
    if not raw:
        return CONNECT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(
            f"$MDCR_RAY_CONNECT_TIMEOUT is {raw!r}; give a number of seconds above 0 (unset: "
            f"{CONNECT_TIMEOUT_S:g})"
        )
    return value


def _host_port(address: str) -> tuple[str, int] | None:
    """Host and port of a Ray address (``host:port``, ``ray://host:port``); None for
    ``auto`` and ``local``, which name no host."""
    from urllib.parse import urlsplit

    if address in ("auto", "local"):
        return None
    client = address.startswith("ray://")
    parts = urlsplit(address if client else f"//{address}")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"Ray address '{address}' has no valid port; give host:port") from None
    if not parts.hostname:
        raise ConfigError(f"Ray address '{address}' names no host; give host:port")
    return parts.hostname, port or (10001 if client else 6379)


def check_reachable(address: str, timeout: float) -> None:
    """A one-line error unless a Ray head answers at ``address`` within ``timeout`` seconds.

    ``ray.init`` retries an address that does not answer for many minutes, so before it
    is called the address is tried here: a TCP connection, then the HTTP/2 greeting every
    gRPC server (Ray's GCS and Ray Client) sends first (skipped under ``RAY_USE_TLS``).
    """
    import socket
    import time

    target = _host_port(address)
    if target is None:
        return
    host, port = target
    where = f"cannot reach Ray at '{address}'"
    wait = f"(waited {timeout:g} s; $MDCR_RAY_CONNECT_TIMEOUT sets the wait)"
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.sendall(_HTTP2_PREFACE)
            head = b""
            while len(head) < 9 and (chunk := sock.recv(9 - len(head))):
                head += chunk
    except socket.gaierror:
        raise ConfigError(f"{where}: unknown host '{host}'; check the address") from None
    except ConnectionRefusedError:
        raise ConfigError(
            f"{where}: nothing listens at {host}:{port} (connection refused); start a cluster "
            "with `ray start --head` and give its address with --ray-address or $RAY_ADDRESS"
        ) from None
    except TimeoutError:
        raise ConfigError(
            f"{where}: no answer from {host}:{port} {wait}; check the address, and that the "
            "head node is up and reachable from here"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}; check the address") from None
    if len(head) < 9 or head[3] != _HTTP2_SETTINGS:
        raise ConfigError(
            f"{where}: {host}:{port} answers, but not as a Ray head; give the head's GCS port "
            "(6379 unless `ray start --port` set another) or ray://host:10001 for Ray Client"
        )


def _init_within(ray: Any, address: str, level: int, timeout: float) -> None:
    """``ray.init(address=...)``, or a one-line error once ``timeout`` seconds have passed.

    The call runs in a daemon thread that stays parked afterwards (Ray ties processes it
    starts to the thread that started them); one that does not return in time is left
    behind, and shuts Ray down should it connect after all.
    """
    import threading
    import time

    start = time.monotonic()
    check_reachable(address, timeout)
    outcome: dict[str, Any] = {}
    finished, park = threading.Event(), threading.Event()

    def init() -> None:
        try:
            ray.init(address=address, logging_level=level)
        except BaseException as exc:  # handed to the caller
            outcome["error"] = exc
        finished.set()
        if outcome.get("abandoned") and "error" not in outcome:
            ray.shutdown()
            return
        park.wait()

    threading.Thread(target=init, name="mdcr-ray-connect", daemon=True).start()
    if not finished.wait(max(timeout - (time.monotonic() - start), 0.0)):
        outcome["abandoned"] = True
        raise ConfigError(
            f"cannot reach Ray at '{address}': no connection within {timeout:g} s "
            "($MDCR_RAY_CONNECT_TIMEOUT sets the wait); check that the address is a Ray "
            "head's (`ray status` there) and that this machine runs the same Ray version"
        )
    if "error" in outcome:
        raise outcome["error"]


def connect(
    address: str,
    workers: int,
    *,
    shared: Sequence[Path] = (),
    reads: Sequence[Path] = (),
    quiet: bool = False,
) -> RayEngine:
    """The Ray engine on the cluster named (or a local instance), its storage checked:
    every node must read what is written into ``shared`` and see ``reads``."""
    ray = require("ray")
    target = address or os.environ.get("RAY_ADDRESS", "")
    level = logging.ERROR if quiet else logging.WARNING
    if not ray.is_initialized():
        try:
            if target:
                _init_within(ray, target, level, connect_timeout())
            else:
                ray.init(  # "local": a new instance, even beside a running one
                    address="local",
                    num_cpus=workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    logging_level=level,
                )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"at '{target}'" if target else "locally"
            raise ConfigError(
                f"cannot start or reach Ray {where} ({str(exc).splitlines()[0]}); start a "
                "cluster with `ray start --head` and give its address with --ray-address "
                "or $RAY_ADDRESS"
            ) from None
    engine = RayEngine(ray, workers, target)
    engine.check_shared(shared, reads)
    return engine

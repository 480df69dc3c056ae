"""A Ray address that does not answer stops the run within a stated time, in one line that
names it; ``ray.init`` alone would retry it for many minutes.

Each case runs ``mdcr encode --executor ray`` in a child process with a short
``$MDCR_RAY_CONNECT_TIMEOUT`` and a hard limit, so that a hang fails the test instead of
stalling the suite. The addresses are on 127.0.0.1: a closed port, a port that accepts and
says nothing, and one that greets as an HTTP/2 server (as Ray's GCS does) and then says
nothing, which gets past the quick check and leaves ``ray.init`` itself hanging.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mdcr.core.errors import ConfigError
from mdcr.engine.ray import _host_port, connect_timeout
from tests.integration.encoders.fixtures import write_corpus

pytest.importorskip("ray")
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 4
LIMIT_S = 90  # the child is killed after this: far above TIMEOUT_S plus Python's start


def _encode_on_ray(tmp_path: Path, address: str) -> tuple[subprocess.CompletedProcess[str], float]:
    write_corpus(tmp_path / "corpus", 5)
    argv = ["encode", "--corpus", str(tmp_path / "corpus"), "--encoder", "random", "-q"]
    argv += ["--executor", "ray", "--ray-address", address, "--home", str(tmp_path / "h")]
    env = {**os.environ, "MDCR_RAY_CONNECT_TIMEOUT": str(TIMEOUT_S)}
    env.pop("RAY_ADDRESS", None)
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mdcr.cli", *argv],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=LIMIT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"mdcr still waited for Ray at {address} after {LIMIT_S} s")
    return done, time.monotonic() - start


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A port whose connections the kernel accepts (the backlog) and nobody answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s


@pytest.fixture
def http2_greeter() -> Iterator[int]:
    """A port that sends an HTTP/2 SETTINGS frame on every connection and nothing more."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # closed at teardown
                return
            conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    yield int(srv.getsockname()[1])
    srv.close()
    for conn in held:
        conn.close()


def test_a_closed_port_is_one_line_at_once(tmp_path: Path) -> None:
    port = _closed_port()
    done, elapsed = _encode_on_ray(tmp_path, f"127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"mdcr: error: cannot reach Ray at '127.0.0.1:{port}': nothing listens at "
        f"127.0.0.1:{port} (connection refused); start a cluster with `ray start --head` and "
        "give its address with --ray-address or $RAY_ADDRESS\n"
    )
    assert elapsed < LIMIT_S / 2


def test_a_port_that_never_answers_stops_at_the_timeout(
    tmp_path: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    done, elapsed = _encode_on_ray(tmp_path, f"127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"mdcr: error: cannot reach Ray at '127.0.0.1:{port}': no answer from 127.0.0.1:{port} "
        f"(waited {TIMEOUT_S} s; $MDCR_RAY_CONNECT_TIMEOUT sets the wait); check the address, "
        "and that the head node is up and reachable from here\n"
    )
    assert TIMEOUT_S <= elapsed < LIMIT_S / 2


def test_a_server_that_greets_then_hangs_stops_ray_init_at_the_timeout(
    tmp_path: Path, http2_greeter: int
) -> None:
    address = f"127.0.0.1:{http2_greeter}"
    done, elapsed = _encode_on_ray(tmp_path, address)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]  # Ray logs its own retries before it
    assert line == (
        f"mdcr: error: cannot reach Ray at '{address}': no connection within {TIMEOUT_S} s "
        "($MDCR_RAY_CONNECT_TIMEOUT sets the wait); check that the address is a Ray head's "
        "(`ray status` there) and that this machine runs the same Ray version"
    )
    assert not [ln for ln in done.stderr.splitlines() if ln.startswith(("Traceback", "  File"))]
    assert TIMEOUT_S <= elapsed < LIMIT_S / 2


def test_addresses_and_the_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _host_port("head:6379") == ("head", 6379)
    assert _host_port("ray://head:10001") == ("head", 10001)
    assert _host_port("ray://head") == ("head", 10001)
    assert _host_port("10.0.0.1") == ("10.0.0.1", 6379)
    assert _host_port("[::1]:7000") == ("::1", 7000)
    assert _host_port("auto") is None
    with pytest.raises(ConfigError, match="has no valid port"):
        _host_port("head:port")
    monkeypatch.delenv("MDCR_RAY_CONNECT_TIMEOUT", raising=False)
    assert connect_timeout() == 60.0
    monkeypatch.setenv("MDCR_RAY_CONNECT_TIMEOUT", "2.5")
    assert connect_timeout() == 2.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("MDCR_RAY_CONNECT_TIMEOUT", bad)
        with pytest.raises(ConfigError, match="give a number of seconds above 0"):
            connect_timeout()

"""One process at a time works on an output: real processes through the real CLI.

The toy stage holds itself mid-run (``TOY_HOLD_SECONDS``) so that a second process
certainly starts while the first holds the lock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mdcr.core.locks import LockBusyError, exclusive

REPO = Path(__file__).resolve().parents[3]
CLI = textwrap.dedent(
    f"""
    import sys
    sys.path.insert(0, {str(REPO)!r})
    import tests.support.toy_stages  # registers the toy stages
    from mdcr.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _start(home: Path, *extra: str, hold: float | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop("TOY_HOLD_SECONDS", None)
    if hold is not None:
        env["TOY_HOLD_SECONDS"] = str(hold)
    argv = [sys.executable, "-c", CLI, "toy-source", "--n", "9", "--home", str(home), *extra]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_started(home: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.time() + 60
    while not list((home / "toy-source").glob(".*.partial/started")):
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the first run never started"
        time.sleep(0.05)


def _leftovers(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "toy-source").iterdir() if p.name.startswith("."))


@pytest.mark.slow
def test_second_identical_run_waits_then_is_up_to_date(tmp_path: Path) -> None:
    first = _start(tmp_path, hold=2)
    _wait_started(tmp_path, first)
    second = _start(tmp_path)
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    assert "Traceback" not in err1 + err2
    assert out1 == out2  # both name the same finished output
    assert f"waiting for PID {first.pid}" in err2 and "up to date" in err2
    assert (err1 + err2).count("running toy-source") == 1  # the work was done once
    folder = Path(out1.strip())
    assert (folder / "manifest.json").is_file() and (folder / "values.parquet").is_file()
    assert _leftovers(tmp_path) == []  # no .partial, no .lock


@pytest.mark.slow
def test_no_wait_names_the_holder_in_one_line(tmp_path: Path) -> None:
    first = _start(tmp_path, hold=2)
    _wait_started(tmp_path, first)
    second = _start(tmp_path, "--no-wait")
    _, err2 = second.communicate(timeout=60)
    first.communicate(timeout=120)
    assert second.returncode == 2
    lines = err2.strip().splitlines()
    assert len(lines) == 1 and f"PID {first.pid}" in lines[0] and "--no-wait" in lines[0]
    assert "Traceback" not in err2
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_lock_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    first = _start(tmp_path, hold=60)
    _wait_started(tmp_path, first)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    left = _leftovers(tmp_path)
    assert any(n.endswith(".lock") for n in left) and any(n.endswith(".partial") for n in left)
    second = _start(tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert "taking over" in err and f"PID {first.pid}" in err and "which is gone" in err
    assert (Path(out.strip()) / "manifest.json").is_file()
    assert _leftovers(tmp_path) == []


def test_lock_in_process_waits_for_release(tmp_path: Path) -> None:
    """Two holders in one process, through two file descriptors: the second cannot enter."""
    lock = tmp_path / "x.lock"
    with exclusive(lock, what="x", quiet=True) as left:
        assert left is None and lock.is_file()
        with (
            pytest.raises(LockBusyError, match=f"PID {os.getpid()}"),
            exclusive(lock, what="x", wait=False, quiet=True),
        ):
            pass
    assert not lock.exists()
    with exclusive(lock, what="x", wait=False, quiet=True):
        pass

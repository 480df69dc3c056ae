"""The ``py:<module>:<attr>`` encoder family: your own
:class:`~mdcr.encoders.base.Encoder` (an object, or a class or factory that returns one).

A class or factory with a parameter named ``options`` receives the
:class:`~mdcr.encoders.base.EncoderOptions`; otherwise it is called without arguments, and
model options given to it are refused (they would change the fingerprint and nothing
else). Its identity is its code, its state and its vectors for the probe papers
(docs/architecture.md, "The encoder's identity").
"""

from __future__ import annotations

import inspect
from typing import Any

from mdcr.core.errors import ConfigError
from mdcr.encoders.base import METRICS, EncoderOptions
from mdcr.encoders.registry import FAMILIES, AnyEncoder, EncoderFamily
from mdcr.retrievers.builtin import EncoderRecord

PY_PREFIX = "py:"

# py: encoders built to be identified, by (arg, options): the run that follows the plan in
# this process takes the very object whose state and probe vectors the fingerprint hashed.
BUILT: dict[tuple[str, str], AnyEncoder] = {}


class PythonFamily(EncoderFamily):
    """``py:<module>:<attr>``: your own encoder, identified by what it is and computes."""

    name = "py"
    prefix = PY_PREFIX
    usage = "py:<module>:<attr>"
    record = EncoderRecord(
        name="py:<module>:<attr>",
        label="",
        description="your own Encoder implementation",
        family="py",
        options=("*",),
    )

    def accepts(self, arg: str) -> bool:
        return arg.count(":") == 1 and all(arg.split(":"))

    def check_options(
        self, record: EncoderRecord, spec: str, arg: str, options: EncoderOptions
    ) -> None:
        if options.given():  # a py: object takes them only if it asks for them
            _check_py_options(arg, options)

    def build(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder:
        from mdcr.encoders.identity import import_attr

        built = BUILT.pop((arg, repr(o)), None)
        if built is not None:  # built (and probed) by the plan of this run
            return built
        _, obj = import_attr(f"{PY_PREFIX}{arg}", arg)
        return _build_py(arg, o, obj)

    def identify(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> dict[str, Any]:
        """Its code (:func:`~mdcr.encoders.identity.python_identity`), and, built, its
        state (:func:`~mdcr.encoders.models.in_memory.model_identity`) and its vectors for
        the probe papers (:mod:`mdcr.encoders.probe`)."""
        from mdcr.encoders.identity import import_attr, python_identity, watch_code
        from mdcr.encoders.models.in_memory import model_identity
        from mdcr.encoders.probe import probe

        spec = f"{PY_PREFIX}{arg}"
        module_name = arg.split(":")[0]
        with watch_code(module_name):
            _, obj = import_attr(spec, arg)
            encoder = _build_py(arg, o, obj)
            probed = probe(spec, encoder)
        cache_key = getattr(encoder, "cache_key", None)
        state = model_identity(
            encoder,
            None if cache_key is None else str(cache_key),
            fix=f"declare cache_key = '<a name for this exact state>' on encoder '{spec}' "
            "(and change it whenever what it loads changes)",
        )
        BUILT[(arg, repr(o))] = encoder
        return {**python_identity(module_name, obj), "state": state, "probe": probed.identity}

    def probed(self, record: EncoderRecord, arg: str, o: EncoderOptions) -> AnyEncoder | None:
        return BUILT.get((arg, repr(o)))


FAMILIES.register(PythonFamily())


def _builds_with_options(obj: Any) -> bool | None:
    """Whether a ``py:`` attribute takes the encode options: True for a class or factory
    with an ``options`` parameter, False for one without, None for a ready object."""
    if inspect.isclass(obj) or (callable(obj) and not hasattr(obj, "encode")):
        try:
            return "options" in inspect.signature(obj).parameters
        except (TypeError, ValueError):  # no signature to read (a builtin)
            return False
    return None


def _check_py_options(arg: str, o: EncoderOptions) -> None:
    """A one-line error for model options given to a ``py:`` encoder that would ignore
    them (they would change the fingerprint and nothing else)."""
    from mdcr.encoders.identity import import_attr

    _, obj = import_attr(f"{PY_PREFIX}{arg}", arg)
    takes = _builds_with_options(obj)
    if takes:
        return
    given = ", ".join(o.given())
    what = "an object" if takes is None else "built without an 'options' parameter"
    raise ConfigError(
        f"encoder 'py:{arg}' is {what} and takes no options, so {given} would be ignored; "
        "leave them out, or expose a class or factory with an 'options' parameter"
    )


def _build_py(arg: str, o: EncoderOptions, obj: Any) -> AnyEncoder:
    """The encoder ``py:<arg>`` names: ``obj`` itself, or what the class or factory
    ``obj`` returns, checked against the :class:`~mdcr.encoders.base.Encoder` protocol."""
    if inspect.isclass(obj) or (callable(obj) and not hasattr(obj, "encode")):
        params = inspect.signature(obj).parameters
        required = [
            n
            for n, p in params.items()
            if n != "options"
            and p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if required:
            raise ConfigError(
                f"encoder 'py:{arg}' needs argument(s) {', '.join(required)} to be built; "
                "give them defaults, take an 'options' parameter, or expose a ready object"
            )
        try:
            obj = obj(options=o) if "options" in params else obj()
        except Exception as exc:  # the user's constructor may raise anything
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise ConfigError(
                f"encoder 'py:{arg}': building it failed ({type(exc).__name__}: {first}); "
                "fix its constructor (--debug shows the traceback)"
            ) from exc
    missing = [a for a in ("name", "dim", "metric", "encode") if not hasattr(obj, a)]
    if missing or getattr(obj, "metric", None) not in METRICS:
        what = f"lacks {', '.join(missing)}" if missing else f"has metric {obj.metric!r}"
        raise ConfigError(
            f"encoder 'py:{arg}' {what}; it must implement mdcr.encoders.base.Encoder "
            f"(name, dim, metric in {', '.join(METRICS)}, encode)"
        )
    return obj  # type: ignore[no-any-return]

"""Job parameters, each declared once.

A job's inputs live on typed dataclasses (the model, the hardware, the layout, the options of
a training or serving run).  Each field that a user can set carries a :class:`Param` in its
metadata: its flag name, the other spellings users script against (Megatron's, vLLM's), its
help, unit, choices and default.  From those fields podsim generates

* the argparse flags of a subcommand (:func:`add_arguments`),
* the sweep's parameters of a run kind (the same :class:`Param` objects),
* the JSON echo of a job's inputs (:func:`echo`),
* the docs' flag tables (:func:`markdown_table`),

so a new knob is one field, and a test compares the four.

Values travel in two forms.  *Flag values* are what a user writes (``--no-flash-attention``
is ``True``, ``--recompute-modules core_attn,mlp`` is a string); *field values* are what the
dataclass holds (``flash_attention=False``, ``recompute_modules=("core_attn", "mlp")``).
:meth:`Param.to_field` and :meth:`Param.to_flag` convert.

Kinds: ``count`` (integer >= 1), ``natural`` (integer >= 0), ``number`` (> 0), ``nonneg``
(>= 0), ``bool`` (a flag that takes no value), ``choice``, ``name`` (a word such as a model or
a preset), ``path`` (a file), ``size`` (bytes, "1M", "16 MB"), ``bandwidth`` ("200 Gbps"),
``list`` (comma-separated values) and ``text`` (any string, e.g. "eager" or a number).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .errors import InputError

KINDS = ("count", "natural", "number", "nonneg", "bool", "choice", "name", "path", "size", "bandwidth", "list", "text")

_SQL = {"count": "BIGINT", "natural": "BIGINT", "number": "DOUBLE", "nonneg": "DOUBLE", "bool": "BOOLEAN"}


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter of a job, as a user sets it.

    Attributes:
        name: the flag without its dashes (``global-batch``); sweep specs may write it with
            underscores, and a results table's column is the underscore form.
        kind: one of :data:`KINDS`.
        default: the flag value when none is given (None: none).
        choices: the values a ``choice`` takes; for a ``name``, the names its registry holds
            (checked there, with the closest name in the error, rather than by argparse).
        help: what it is, with its unit.
        unit: the unit of a number (``s``, ``GiB``, ``GB/s``), for tables.
        aliases: other spellings of the flag, without dashes (``micro-batch-size``).
        metavar: the placeholder in ``--help``.
        field: the dataclass field it sets (default: ``name`` with underscores).
        negate: a ``bool`` flag that turns its field off (``no-flash-attention`` sets
            ``flash_attention=False``).
        item: the type of a ``list``'s items (``str`` or ``int``).
        sweep: also a sweep parameter (outputs such as ``--json`` are not).
        exclusive: the name of the mutually exclusive group the flag belongs to, if any.
        const: a ``bool`` flag that sets its field to this value (``--fsdp`` sets ``zero=3``);
            declared beside the field's own parameter (:func:`param`'s ``also``).
        items: what a ``list``'s items are, for messages ("layer counts").
        positional: on the command line, an optional positional argument (``podsim collective
            all_reduce``) instead of a flag; its aliases stay flags.
        cli: also a command-line flag (a sweep-only parameter, such as a collective's one
            ``size``, is not).
        parse: how a flag value becomes the field's, with the parameter's own checks and
            messages: ``parse(value, "--flag")`` (default: by ``kind``, ``negate`` and ``item``).
            A ``path`` with a ``const`` takes an optional value (``--trace`` alone is ``const``);
            a ``bool`` with a ``parse`` takes a value (``--rendezvous-protocol true``).
        hidden: accepted but not shown in ``--help`` or the docs (flags kept for another
            tool's command lines, such as ASTRA-sim's logging options).
        repeat: the flag may be given several times (``--dtype bf16 --dtype fp8``), each value
            checked alone; a positional takes one or more values.  The field holds a tuple.
        required: the command line must give it (a positional: exactly one value, or one or
            more with ``repeat``).
    """

    name: str
    kind: str
    default: Any = None
    choices: tuple[Any, ...] = ()
    help: str = ""
    unit: str = ""
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    field: str | None = None
    negate: bool = False
    item: type = str
    sweep: bool = True
    exclusive: str | None = None
    const: Any = None
    items: str = "values"
    positional: bool = False
    cli: bool = True
    parse: Callable[[Any, str], Any] | None = None
    hidden: bool = False
    repeat: bool = False
    required: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"parameter {self.name}: kind {self.kind!r} is not one of {KINDS}")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"parameter {self.name}: a choice needs its choices")

    @property
    def column(self) -> str:
        """The results table's column (``global_batch``)."""
        return self.name.replace("-", "_")

    @property
    def dest(self) -> str:
        """The argparse destination: the flag's own name (``no_flash_attention``), or the field
        a constant flag sets (``--fsdp`` sets ``zero``)."""
        return (self.field or self.column) if self.const is not None else self.column

    @property
    def sql_type(self) -> str:
        """The DuckDB type of its column."""
        return _SQL.get(self.kind, "VARCHAR")

    @property
    def flags(self) -> tuple[str, ...]:
        """Every flag spelling on the command line (``--micro-batch``, ``--micro-batch-size``; a
        one-letter alias is a short flag, ``-b``); a positional parameter has only its aliases."""
        names = self.aliases if self.positional else (self.name, *self.aliases)
        return tuple(f"-{n}" if len(n) == 1 else f"--{n}" for n in names)

    def to_field(self, value: Any) -> Any:
        """A flag value as its field holds it."""
        if self.parse is not None and value is not None and not isinstance(value, (tuple, list)):
            return self.parse(value, self.flags[0] if self.flags else self.name)
        if self.negate:
            return not value
        if self.repeat and isinstance(value, list):
            return tuple(value)
        if self.kind == "list" and isinstance(value, str):
            out = []
            for part in (x for x in value.replace(" ", "").split(",") if x):
                try:
                    out.append(self.item(part))
                except ValueError:
                    raise InputError(
                        f"--{self.name} takes comma-separated {self.items}, e.g. 1,2,2,1; got {part!r} in {value!r}"
                    ) from None
            return tuple(out)
        return value

    def to_flag(self, value: Any) -> Any:
        """A field value as a user writes it."""
        if self.negate:
            return not value
        if self.kind == "list" and isinstance(value, (tuple, list)):
            return ",".join(str(x) for x in value)
        return value


def param(p: Param, default: Any = dataclasses.MISSING, also: tuple[Param, ...] = (), required: bool = False) -> Any:
    """A dataclass field declared by ``p``; ``default`` is the field's default (derived from
    ``p.default`` when not given); ``also``: other flags that set this field to a constant
    (:attr:`Param.const`); ``required``: the field has no default."""
    if default is dataclasses.MISSING and not required:
        default = None if p.default is None else p.to_field(p.default)
    meta = {"param": p, "also": also}
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class JobSpec:
    """What every job spec has: :meth:`from_values`.  A job spec is a frozen dataclass whose
    fields declare their parameters (:func:`param`) or hold other such dataclasses
    (:func:`nested`)."""

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Any:
        """A job from flag values keyed by parameter or field name (argparse's namespace as a
        dict, or a sweep point); missing ones take their flags' defaults (:func:`build`)."""
        return build(cls, values)


def params_of(cls: type) -> tuple[Param, ...]:
    """The parameters declared on ``cls`` and, depth first, on its dataclass-typed fields."""
    out: list[Param] = []
    for f in dataclasses.fields(cls):
        p = f.metadata.get("param")
        if p is not None:
            out.append(p)
            out.extend(f.metadata.get("also", ()))
        elif f.metadata.get("nested") is not None:
            out.extend(params_of(f.metadata["nested"]))
    return tuple(out)


def refuse_unused(params: Iterable[Param], uses: Iterable[tuple[str, Any, bool, str]]) -> None:
    """Refuse a flag given a value (other than its default) that nothing would read: each of
    ``uses`` is ``(flag name, its value, whether the run reads it, what would make it read)``.

    Raises:
        InputError: naming the flag and what it needs (``--swap-space: only used with
            --preemption swap, not given here (it would be ignored)``)."""
    default = {p.name: p.default for p in params}
    for name, value, used, parent in uses:
        if not used and value != default[name]:
            raise InputError(f"only used with {parent}, not given here (it would be ignored)", where=f"--{name}")


def nested(cls: type) -> Any:
    """A dataclass field holding a ``cls`` (whose parameters :func:`params_of` collects)."""
    return dataclasses.field(default_factory=cls, metadata={"nested": cls})


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """A ``cls`` from flag values keyed by parameter name (``global-batch``) or field name
    (``global_batch``); a missing one takes its flag's default, as on the command line (so a
    parameter without a default is None, for the API to resolve or refuse).  Nested dataclass
    fields are built from the same values."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        p = f.metadata.get("param")
        if p is not None:
            key = next((k for k in (p.name, p.column, p.dest) if k in values), None)
            kwargs[f.name] = p.to_field(values[key] if key is not None else p.default)
            for c in f.metadata.get("also", ()):
                if values.get(c.name) or values.get(c.column):
                    kwargs[f.name] = c.const
        elif f.metadata.get("nested") is not None:
            kwargs[f.name] = build(f.metadata["nested"], values)
    return cls(**kwargs)


def echo(obj: Any, inputs_only: bool = True) -> dict[str, Any]:
    """The parameters of a job as flag values keyed by parameter name: the JSON echo of its
    inputs (nested dataclasses flattened, as on the command line).  ``inputs_only``: leave out
    the outputs (parameters that are no sweep parameters, such as ``--json``).  A value that is
    a typed spec (a what-if's GPU or cluster) is echoed by its name."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        p = f.metadata.get("param")
        value = getattr(obj, f.name)
        if p is not None and (p.sweep or not inputs_only):
            value = p.to_flag(value)
            if dataclasses.is_dataclass(value):
                value = getattr(value, "key", None) or getattr(value, "name", None) or str(value)
            out[p.name] = value
        elif f.metadata.get("nested") is not None:
            out.update(echo(value, inputs_only))
    return out


#: argument types by kind: the parser's converters (given by the CLI, which owns their messages)
Converters = Mapping[str, Callable[[str], Any]]


def add_arguments(
    parser: argparse.ArgumentParser, params: Iterable[Param], converters: Converters, skip: Iterable[str] = ()
) -> None:
    """Add one flag per parameter to ``parser`` (aliases as extra spellings, mutually exclusive
    groups by :attr:`Param.exclusive`); ``converters`` maps a parameter's name, or else its
    kind, to the function that parses its text (others take the text as it is)."""
    groups: dict[str, Any] = {}
    skipped = set(skip)
    for p in params:
        if p.name in skipped or not p.cli:
            continue
        if p.positional:
            nargs = ("+" if p.required else "*") if p.repeat else (None if p.required else "?")
            pkw: dict[str, Any] = {"nargs": nargs, "help": p.help or None}
            if not p.required:
                pkw["default"] = p.default
            if p.choices and p.kind == "choice":
                pkw["choices"] = list(p.choices)
            else:
                pkw["metavar"] = p.metavar or p.name.upper()
            convert = converters.get(p.name) or converters.get(p.kind)
            if convert is not None:
                pkw["type"] = convert
            parser.add_argument(p.dest, **pkw)
            if not p.aliases:
                continue
        target = parser
        if p.exclusive:
            if p.exclusive not in groups:
                groups[p.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[p.exclusive]
        # argparse formats help with %: a literal one (2%:1.2) is doubled
        text = p.help.replace("%", "%%") if p.help else None
        kw: dict[str, Any] = {"dest": p.dest, "help": argparse.SUPPRESS if p.hidden else text}
        if p.kind == "bool" and p.const is not None:  # sets another flag's field: that flag's default stays
            kw.update(action="store_const", const=p.const, default=argparse.SUPPRESS)
        elif p.kind == "bool" and p.parse is None:
            kw.update(action="store_true", default=bool(p.default))
        elif p.const is not None:  # an optional value: the flag alone is the constant
            kw.update(nargs="?", const=p.const, default=p.default, metavar=p.metavar or p.name.upper())
        else:
            kw.update(default=p.default, metavar=p.metavar or p.name.split("-")[-1].upper())
        if p.repeat:
            kw["action"] = "append"
        if p.required:
            kw["required"] = True
        if p.kind != "bool" and p.const is None:
            if p.choices and p.kind != "name":  # a name's choices come from a registry, whose error is kinder
                kw.update(choices=list(p.choices))
                kw.pop("metavar")
            convert = converters.get(p.name) or converters.get(p.kind)
            if convert is not None:
                kw["type"] = convert
        target.add_argument(*p.flags, **kw)


def cell_text(text: str) -> str:
    """``text`` as a Markdown table cell shows it: ``|`` escaped, ``<PATH>`` not taken for a tag."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def markdown_table(params: Iterable[Param]) -> str:
    """The docs' table of ``params``: flag (and aliases), default, what it is."""
    rows = ["| flag | default | what it is |", "|---|---|---|"]
    for p in params:
        if p.hidden:
            continue
        flags = ", ".join(f"`{f}`" for f in p.flags)
        if p.positional:
            flags = ", ".join([f"`{p.metavar or p.name.upper()}` (positional)", *([flags] if flags else [])])
        elif not p.cli:
            flags = f"`{p.name}` (sweep only)"
        if p.kind == "choice":
            flags += " " + "\\|".join(str(c) for c in p.choices)
        default = "" if p.default in (None, False) else f"`{p.default}`"
        text = cell_text(p.help)
        if p.unit and p.unit not in text:
            text += f" ({p.unit})"
        rows.append(f"| {flags} | {default} | {text} |")
    return "\n".join(rows)

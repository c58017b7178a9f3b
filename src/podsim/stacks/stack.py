"""Software stacks as data: a preset name (``stacks/presets/<name>.yaml``) or a user's YAML file.

A stack file::

    name: torchtitan
    title: torchtitan (FSDP2, eager)
    kind: training                 # or serving
    base: megatron-core            # optional: the stack whose values the rest keep
    description: ...
    training:                      # the properties of stacks/schema.py
      data_parallel: fsdp
      elementwise_traffic: 2.4
    sources:                       # a citation for every property this file sets
      data_parallel: "pytorch/torchtitan docs/fsdp.md @9dec370"
      elementwise_traffic: "fitted: podsim calibrate training (stack_anchor_rows.csv row ...)"
    free:                          # what podsim calibrate may fit, with bounds
      gemm_efficiency: [0.5, 1.2]

Every value is checked against its declaration (:mod:`podsim.stacks.schema`): an unknown key,
a value out of range, a property without a citation is an :class:`~podsim.errors.InputError`
naming the file and the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError, closest, unknown_key_error, yaml_error
from ..fileio import load_yaml, package_files, read_yaml
from ..hardware.gpu import GpuSpec, get_gpu, gpu_registry
from .schema import ARCH_DEFAULT, BY_NAME, KINDS, TOP_KEYS, Prop, fittable, section_props

#: the training stack a job runs on when it names none (today's behaviour)
DEFAULT_TRAINING = "megatron-core"
PRESET_DIR = "stacks/presets"


@dataclass(frozen=True)
class SoftwareStack:
    """A resolved stack: its own and its bases' values, each with its citation.

    Attributes:
        name: the preset name, or the file's ``name`` (default: the file's stem).
        title: a one-line description.
        kind: ``training`` or ``serving``.
        origin: ``preset`` or the path of the user's file.
        base: the stack it builds on (None for a root).
        description: what it is, in a few sentences.
        values: property -> value (a float, bool or word; for a per-architecture property a
            mapping ``{default: x, ampere: y}``), this file's and its bases'.
        sources: property -> citation of its value.
        free: property -> (lo, hi): what ``podsim calibrate`` may fit.
    """

    name: str
    title: str
    kind: str
    origin: str = "preset"
    base: str | None = None
    description: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    free: dict[str, tuple[float, float]] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of property ``key`` (``default`` where neither this stack nor a base sets it)."""
        return self.values.get(key, default)

    def value_for(self, key: str, architecture: str) -> Any:
        """The value of ``key`` on a GPU of ``architecture`` (``ampere``, ``hopper``, ...): a
        per-architecture mapping's entry for it, else its ``default``; None where unset.  A
        number, or a table by sequence length (``{512: 0.67, 8192: 0.56}``)."""
        v = self.values.get(key)
        if isinstance(v, dict) and ARCH_DEFAULT in v:
            return v.get(architecture, v[ARCH_DEFAULT])
        return v

    def with_values(self, values: dict[str, Any]) -> SoftwareStack:
        """This stack with ``values`` set over its own (a fit's trial or result)."""
        return replace(self, values={**self.values, **values})

    def fitted_value(self, key: str, value: float, architectures: list[str]) -> float | dict[str, float]:
        """How a fit's ``value`` of ``key`` on GPUs of ``architectures`` is written over this
        stack: the number, or, where this stack gives ``key`` per architecture, its mapping with
        the entries those architectures take (their own, or ``default``) set to ``value``."""
        have = self.values.get(key)
        if not isinstance(have, dict) or ARCH_DEFAULT not in have:
            return value
        out = dict(have)
        for arch in architectures:
            out[arch if arch in have else ARCH_DEFAULT] = value
        return out

    def echo(self) -> dict[str, Any]:
        """The stack as a result's JSON shows it: name, origin and every value it sets."""
        return {
            "name": self.name,
            "kind": self.kind,
            "origin": self.origin,
            "base": self.base,
            "values": dict(self.values),
        }


def preset_names() -> list[str]:
    """The shipped presets' names, sorted."""
    d = resources.files("podsim") / PRESET_DIR
    return sorted(p.name[: -len(".yaml")] for p in d.iterdir() if p.name.endswith(".yaml"))


def architectures() -> list[str]:
    """The GPU architectures of the shipped GPUs (``ampere``, ``hopper``, ...), sorted."""
    return sorted({spec.architecture for _, spec in gpu_registry().items() if spec.architecture})


def _check_by_architecture(prop: Prop, value: dict, src: str, where: str) -> dict[str, float]:
    """A per-architecture mapping ``{default: x, <architecture>: y, ...}`` of numbers."""
    known = architectures()
    if ARCH_DEFAULT not in value:
        raise InputError(
            f"{prop.name} per GPU architecture needs a {ARCH_DEFAULT!r} entry (the value of the architectures "
            f"it does not list), e.g. {{{ARCH_DEFAULT}: 0.8, ampere: 1.0}}",
            src,
            where,
        )
    out = {}
    for arch, v in value.items():
        if str(arch) != ARCH_DEFAULT and str(arch) not in known:
            raise unknown_key_error(str(arch), [ARCH_DEFAULT, *known], src, f"GPU architecture in {where}")
        out[str(arch)] = _check_value(replace(prop, by_architecture=False), v, src, f"{where}.{arch}")
    return out


def _is_count(key: Any) -> bool:
    """``key`` is a token count: an int, or the digits a JSON file writes an int key as."""
    return (isinstance(key, int) and not isinstance(key, bool)) or (isinstance(key, str) and key.isdecimal())


def _check_by_seq(prop: Prop, value: dict, src: str, where: str) -> dict[int, float]:
    """A table ``{sequence length (tokens): number}``, by increasing length."""
    out = {}
    for key, v in value.items():
        seq = int(key) if _is_count(key) else key  # a JSON file's keys are strings
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise InputError(
                f"{prop.name} by sequence length takes whole token counts as keys (e.g. {{512: 0.67, 8192: 0.56}}), "
                f"got {seq!r}",
                src,
                where,
            )
        out[seq] = _check_value(replace(prop, by_architecture=False, by_seq=False), v, src, f"{where}.{seq}")
    return dict(sorted(out.items()))


def _check_value(prop: Prop, value: Any, src: str, where: str) -> Any:
    """``value`` as property ``prop`` holds it; InputError naming ``where`` otherwise."""
    if isinstance(value, dict) and prop.by_seq and any(_is_count(k) for k in value):
        return _check_by_seq(prop, value, src, where)
    if prop.by_architecture and isinstance(value, dict):
        return _check_by_architecture(prop, value, src, where)
    expect = {
        "number": f"a number from {prop.lo:g} to {prop.hi:g} {prop.unit}".rstrip()
        + (f" (or a mapping {{{ARCH_DEFAULT}: x, ampere: y}} by GPU architecture)" if prop.by_architecture else "")
        + (" (or a table {512: x, 8192: y} by sequence length)" if prop.by_seq else ""),
        "choice": "one of " + ", ".join(prop.choices),
        "bool": "true or false",
        "number|word": f"a number from {prop.lo:g} to {prop.hi:g} {prop.unit} or one of " + ", ".join(prop.choices),
    }[prop.kind]
    if prop.kind == "bool":
        if isinstance(value, bool):
            return value
    elif prop.kind == "choice" or (prop.kind == "number|word" and isinstance(value, str)):
        if isinstance(value, str) and value in prop.choices:
            return value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if math.isfinite(v) and prop.lo <= v <= prop.hi:
            return v
    raise InputError(f"{prop.name} must be {expect}, got {value!r}", src, where)


def _free(data: Any, src: str, section: str) -> dict[str, tuple[float, float]]:
    """The ``free`` mapping: property -> [lo, hi] inside the property's own range."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError("free must map properties to [lo, hi] bounds", src, "free")
    out = {}
    for key, bounds in data.items():
        prop = BY_NAME.get(str(key))
        if prop is None or prop not in fittable(section):
            numbers = [p.name for p in fittable(section)]
            raise unknown_key_error(str(key), numbers, src, f"free {section} parameter")
        ok = isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, (int, float)) for b in bounds)
        if not ok or not (prop.lo <= bounds[0] < bounds[1] <= prop.hi):
            raise InputError(
                f"free.{key} must be [lo, hi] with {prop.lo:g} <= lo < hi <= {prop.hi:g}, got {bounds!r}",
                src,
                f"free.{key}",
            )
        out[str(key)] = (float(bounds[0]), float(bounds[1]))
    return out


def parse_stack(data: Any, src: str, origin: str, default_name: str, seen: tuple[str, ...] = ()) -> SoftwareStack:
    """A stack from a parsed YAML mapping (``src``: the file, for messages), its base resolved.

    Raises:
        InputError: an unknown or misplaced key, a value out of range, a property without a
            citation, an unknown or circular base.
    """
    if not isinstance(data, dict):
        raise InputError("a stack file must be a mapping (name, kind, training or serving, sources)", src)
    for key in data:
        if key not in TOP_KEYS:
            raise unknown_key_error(str(key), TOP_KEYS, src)
    kind = data.get("kind")
    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}", src, "kind")
    other = "serving" if kind == "training" else "training"
    if data.get(other) is not None:
        raise InputError(f"a {kind} stack has no {other} section", src, other)
    name = str(data.get("name") or default_name)
    base_name = data.get("base")
    if base_name is not None:
        base_name = str(base_name)
        ref = base_name
        if looks_like_file(ref) and origin != "preset" and not Path(ref).is_absolute():
            ref = str(Path(src).parent / ref)  # a base file next to this one
        # files are told apart by their resolved paths (a file's name need not be its stack's)
        here = (str(Path(src).resolve()),) if origin != "preset" else ()
        key = str(Path(ref).resolve()) if looks_like_file(ref) else ref
        if {base_name, key} & {*seen, name, *here}:
            raise InputError(f"base {base_name!r} makes a cycle ({' -> '.join((*seen, name, base_name))})", src, "base")
        try:
            base = load_stack(ref, seen=(*seen, name, *here))
        except InputError as e:
            raise InputError(e.message, src, "base") from None
        if base.kind != kind:
            raise InputError(f"base {base_name!r} is a {base.kind} stack, this one a {kind} stack", src, "base")
        values, sources = dict(base.values), dict(base.sources)
    else:
        values, sources = {}, {}
    own = data.get(kind) or {}
    if not isinstance(own, dict):
        raise InputError(f"{kind} must be a mapping of properties", src, kind)
    cites = data.get("sources") or {}
    if not isinstance(cites, dict):
        raise InputError("sources must map each property set to its citation", src, "sources")
    known = [p.name for p in section_props(kind)]
    for key, value in own.items():
        prop = BY_NAME.get(str(key))
        if prop is None or prop.section != kind:
            raise unknown_key_error(str(key), known, src, f"{kind} property")
        values[str(key)] = _check_value(prop, value, src, f"{kind}.{key}")
        cite = cites.get(key)
        if not isinstance(cite, str) or not cite.strip():
            raise InputError(f"{kind}.{key} has no citation: give sources.{key} (where its value comes from)", src)
        sources[str(key)] = cite.strip()
    for key in cites:
        if key not in own:
            raise InputError(f"sources.{key} cites a property this file does not set", src, f"sources.{key}")
    return SoftwareStack(
        name=name,
        title=str(data.get("title") or name),
        kind=kind,
        origin=origin,
        base=base_name,
        description=" ".join(str(data.get("description") or "").split()),
        values=values,
        sources=sources,
        free=_free(data.get("free"), src, kind),
    )


def read_stack_file(path: str | Path, seen: tuple[str, ...] = ()) -> SoftwareStack:
    """A user's stack file."""
    src = str(path)
    return parse_stack(read_yaml(path, "stack file"), src, src, Path(path).stem, seen)


@cache
def _preset(name: str) -> SoftwareStack:
    p = resources.files("podsim") / PRESET_DIR / f"{name}.yaml"
    src = f"podsim/{PRESET_DIR}/{name}.yaml"
    try:
        data = load_yaml(p.read_text())
    except yaml.YAMLError as e:
        raise yaml_error(e, src) from None
    return parse_stack(data, src, "preset", name, (name,))


def looks_like_file(text: str) -> bool:
    """``text`` names a file rather than a preset (a path separator or a YAML suffix)."""
    return "/" in text or "\\" in text or text.endswith((".yaml", ".yml", ".json"))


def load_stack(name_or_file: str, kind: str | None = None, seen: tuple[str, ...] = ()) -> SoftwareStack:
    """The stack ``name_or_file`` names: a preset (``podsim stack --list``) or a stack YAML.

    ``kind``: the kind the caller needs (``training`` or ``serving``), checked.

    Raises:
        InputError: an unknown preset (with the closest name), a bad file, a stack of the other kind.
    """
    text = str(name_or_file).strip()
    if looks_like_file(text) or Path(text).is_file():
        st = read_stack_file(text, seen)
    else:
        names = preset_names()
        if text not in names:
            hint = closest(text, names)
            raise InputError(
                f"unknown stack {text!r}"
                + (f"; did you mean {hint!r}?" if hint else "")
                + f" (presets: {', '.join(names)}; "
                "or a stack YAML file)",
                where="--stack",
            )
        st = _preset(text)
    if kind is not None and st.kind != kind:
        names = [n for n in preset_names() if _preset(n).kind == kind]
        raise InputError(
            f"stack {st.name!r} is a {st.kind} stack; this job needs a {kind} stack ({', '.join(names)})",
            where="--stack",
        )
    return st


def presets(kind: str | None = None) -> list[SoftwareStack]:
    """Every shipped preset (of ``kind`` where given), by name."""
    out = [_preset(n) for n in preset_names()]
    return [s for s in out if kind is None or s.kind == kind]


def serving_stack(name: str | None) -> SoftwareStack | None:
    """The serving stack ``name`` names (None: none)."""
    return load_stack(name, "serving") if name else None


def measured_serving_gpus() -> list[str]:
    """The GPUs podsim ships measured serving steps of (``serving/profiles/steps/<gpu>.csv``):
    where a stack's ``host_overhead_ms: eager | cuda-graphs`` has a value."""
    return sorted(p.stem for p in package_files("podsim.serving", "profiles/steps"))


def serving_host_overhead(
    given: float | str, stack: SoftwareStack | None, gpu: str | GpuSpec | None = None
) -> float | str:
    """The host overhead a serving job runs with (ms per engine step, or ``eager`` /
    ``cuda-graphs``): ``--host-overhead-ms`` when given (not 0), else its stack's
    ``host_overhead_ms`` (else 0).

    ``gpu``: the job's GPU, checked when the stack's value is a word: that is podsim's
    measurement of such an engine on the GPU, shipped for :func:`measured_serving_gpus` only.

    Raises:
        InputError: the stack's host overhead is a measurement podsim does not ship for ``gpu``
            (the message names the stack, the GPU, the GPUs measured and what to give instead).
    """
    if stack is None or given or stack.get("host_overhead_ms") is None:
        return given
    value = stack.get("host_overhead_ms")
    if not isinstance(value, str) or gpu is None:
        return value
    spec = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)
    have = measured_serving_gpus()
    if spec.key in have:
        return value
    base = stack.name if stack.origin == "preset" else stack.origin
    raise InputError(
        f"stack {stack.name!r} takes its host time per engine step from podsim's measurement of a {value} "
        f"engine on the GPU, and podsim has no serving measurements of the {spec.name} ({spec.key}); "
        f"measured GPUs: {', '.join(have) or 'none'}.  Give the host time per step yourself with "
        f"--host-overhead-ms MS (it wins over the stack's), or fit it to step times you measured: "
        f"podsim calibrate inference ROWS.csv --base {base} --out my-serving.yaml (docs/stacks.md)",
        where="--stack",
    )

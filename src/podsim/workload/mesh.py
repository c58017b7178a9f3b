"""A parallel job's ranks laid out as a mesh: its layout and each rank's coordinates.

``--layout tp=T[,pp=P][,cp=C][,fsdp]`` on ``--world-size N``: the data-parallel degree is what
is left, ``N / (T * P * C)``.  Ranks are laid out as torch's ``DeviceMesh`` of dimensions
``("pp", "dp", "cp", "tp")`` in that order (tensor parallelism innermost, so a TP group is
consecutive ranks): rank ``r`` sits at ``(pp, dp, cp, tp)`` with
``r = ((pp * DP + dp) * C + cp) * T + tp``.

Ranks at the same ``(pp, tp)`` coordinate run the same program up to their group peers (data-
and context-parallel replicas), so only the ``T * P`` ranks with ``dp = cp = 0`` are traced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError

#: the mesh dimensions, outermost first
DIMS = ("pp", "dp", "cp", "tp")


@dataclass(frozen=True)
class MeshLayout:
    """Degrees of each parallel dimension; ``fsdp``: parameters sharded over dp (FSDP2)."""

    world_size: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    fsdp: bool = False

    @property
    def dp(self) -> int:
        """The data-parallel degree: the ranks left over."""
        return self.world_size // (self.tp * self.pp * self.cp)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The mesh's shape, ``(pp, dp, cp, tp)``."""
        return (self.pp, self.dp, self.cp, self.tp)

    def spec(self) -> str:
        """The layout as ``--layout`` spells it (``tp=2,pp=2,fsdp``)."""
        parts = [f"{d}={getattr(self, d)}" for d in ("tp", "pp", "cp") if getattr(self, d) > 1]
        return ",".join(parts + (["fsdp"] if self.fsdp else [])) or "dp"

    def coords(self, rank: int) -> dict[str, int]:
        """``{"pp", "dp", "cp", "tp"}`` of ``rank``."""
        out, rest = {}, rank
        for d, n in zip(reversed(DIMS), reversed(self.shape)):
            out[d] = rest % n
            rest //= n
        return {d: out[d] for d in DIMS}

    def rank_of(self, pp: int = 0, dp: int = 0, cp: int = 0, tp: int = 0) -> int:
        """The rank at a coordinate."""
        return ((pp * self.dp + dp) * self.cp + cp) * self.tp + tp

    def distinct_ranks(self) -> list[int]:
        """The ranks to trace: one per ``(pp, tp)`` coordinate, at ``dp = cp = 0``."""
        return [self.rank_of(pp=p, tp=t) for p in range(self.pp) for t in range(self.tp)]

    def representative(self, rank: int) -> int:
        """The traced rank whose program ``rank`` runs."""
        c = self.coords(rank)
        return self.rank_of(pp=c["pp"], tp=c["tp"])

    def with_world_size(self, world_size: int, where: str = "--gpus") -> MeshLayout:
        """The same TP/PP/CP layout on ``world_size`` ranks (another data-parallel degree).

        Raises:
            InputError: when ``world_size`` is not a multiple of ``tp * pp * cp``.
        """
        return parse_layout(self.spec(), world_size, where)

    def to_json(self) -> dict[str, Any]:
        """The layout as ``capture.json`` stores it."""
        return {"spec": self.spec(), "tp": self.tp, "pp": self.pp, "cp": self.cp, "dp": self.dp, "fsdp": self.fsdp}


def parse_layout(spec: str, world_size: int, where: str = "--layout") -> MeshLayout:
    """``tp=T[,pp=P][,cp=C][,fsdp]`` (``dp`` alone: plain data parallel) on ``world_size`` ranks.

    Raises:
        InputError: for an unknown, empty or repeated part, a degree that is not a whole number
            >= 1, or a layout that does not divide the world (naming both).
    """
    if world_size < 1:
        raise InputError(f"the world size must be at least 1, got {world_size}", where="--world-size")
    degrees = {"tp": 1, "pp": 1, "cp": 1}
    fsdp = False
    seen: set[str] = set()
    for part in (p.strip() for p in spec.split(",")):
        key, eq, value = part.partition("=")
        name = {"fsdp2": "fsdp", "ddp": "dp"}.get(key.strip(), key.strip())
        if not part:
            raise InputError(
                f"layout {spec!r} has an empty part: expected tp=T, pp=P, cp=C, fsdp or dp, comma-separated",
                where=where,
            )
        if name in seen:
            raise InputError(f"layout {spec!r} gives {name} twice: give it once", where=where)
        seen.add(name)
        if part in ("fsdp", "fsdp2"):
            fsdp = True
            continue
        if part in ("dp", "ddp"):
            continue
        if not eq or key not in degrees:
            raise InputError(
                f"unknown layout part {part!r}: expected tp=T, pp=P, cp=C or fsdp (e.g. tp=4,pp=2,fsdp)", where=where
            )
        if not value.isdecimal() or int(value) < 1:
            raise InputError(f"{key} must be a whole number >= 1, got {value!r}", where=where)
        degrees[key] = int(value)
    product = degrees["tp"] * degrees["pp"] * degrees["cp"]
    if world_size % product:
        raise InputError(
            f"layout {spec!r} needs a multiple of tp x pp x cp = {product} ranks; the world size is {world_size}",
            where=where,
        )
    return MeshLayout(world_size, degrees["tp"], degrees["pp"], degrees["cp"], fsdp)


def layout_from_json(d: Any, world_size: int, source: str) -> MeshLayout:
    """The layout ``capture.json`` stored (see :meth:`MeshLayout.to_json`).

    Raises:
        InputError: for a missing or malformed layout.
    """
    if not isinstance(d, dict) or not isinstance(d.get("spec"), str):
        raise InputError("expected layout: {spec: 'tp=T,pp=P,...', ...}", source, "layout")
    return parse_layout(d["spec"], world_size, f"{source}: layout")

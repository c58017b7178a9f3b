"""The workload IR: programs (op DAGs in arrays) shared by ranks, and process groups."""

from .groups import GroupTable
from .ops import ALL_DIMS, NO_VALUE, CollectiveKind, OpKind
from .program import COLUMNS, SEGMENTS, Program, ProgramBuilder
from .validate import check_acyclic
from .workload import Group, Workload, dedupe_programs, groups_from_mapping

__all__ = [
    "ALL_DIMS",
    "NO_VALUE",
    "COLUMNS",
    "SEGMENTS",
    "CollectiveKind",
    "OpKind",
    "Program",
    "ProgramBuilder",
    "Group",
    "GroupTable",
    "Workload",
    "dedupe_programs",
    "groups_from_mapping",
    "check_acyclic",
]

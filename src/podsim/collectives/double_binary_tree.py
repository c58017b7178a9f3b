"""Double binary tree all-reduce (ASTRA-sim's ``doubleBinaryTree``).

Two complete binary trees over the NPUs of a dimension, with ids laid out in order; chunks
alternate between them.  Each tree hangs below an extra root NPU with a single child.  A leaf
sends its whole chunk to its parent and waits for the result; an inner node waits for both
children (reducing each), sends up, waits for the parent (reducing), then sends down to both
children; the root reduces its child's data and sends it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError
from ..workload.ops import CollectiveKind
from .base import Direction, PhaseAlgorithm, PhaseHost
from .registry import register_phase

if TYPE_CHECKING:
    from .plan import LogicalDim


@dataclass
class _TreeNode:
    parent: "_TreeNode | None" = None
    left: "_TreeNode | None" = None
    right: "_TreeNode | None" = None
    id: int = -1


class BinaryTree:
    """One of the two trees: ``total`` NPUs ``stride`` apart starting at ``start``."""

    def __init__(self, total: int, start: int, stride: int, root_min: bool) -> None:
        depth = 1
        tmp = total
        while tmp > 1:
            depth += 1
            tmp //= 2
        root = _TreeNode()
        sub = self._grow(depth - 1, root)
        if root_min:
            root.right = sub
        else:
            root.left = sub
        self.nodes: dict[int, _TreeNode] = {}
        self._next = start
        self._stride = stride
        self._number(root)

    def _grow(self, depth: int, parent: _TreeNode) -> _TreeNode:
        node = _TreeNode(parent)
        if depth > 1:
            node.left = self._grow(depth - 1, node)
            node.right = self._grow(depth - 1, node)
        return node

    def _number(self, node: _TreeNode) -> None:  # in-order
        if node.left is not None:
            self._number(node.left)
        node.id = self._next
        self.nodes[self._next] = node
        self._next += self._stride
        if node.right is not None:
            self._number(node.right)

    def links(self, npu: int) -> tuple[int, int, int, str]:
        """(parent, left child, right child, role) of ``npu``; -1 where there is none."""
        n = self.nodes[npu]
        ids = tuple(-1 if x is None else x.id for x in (n.parent, n.left, n.right))
        if n.parent is None:
            role = "root"
        elif n.left is None and n.right is None:
            role = "leaf"
        else:
            role = "inner"
        return ids[0], ids[1], ids[2], role


class DoubleBinaryTree:
    """The pair of trees of one rank; :meth:`next_tree` alternates between them per chunk."""

    def __init__(self, total: int, start: int, stride: int) -> None:
        self.trees = (BinaryTree(total, start, stride, root_min=False), BinaryTree(total, start, stride, root_min=True))
        self.size = total
        self._counter = 0

    def next_tree(self) -> BinaryTree:
        t = self.trees[self._counter % 2]
        self._counter += 1
        return t


@register_phase
class DoubleBinaryTreePhase(PhaseAlgorithm):
    """One rank's part of a tree all-reduce of one chunk (always an all-reduce)."""

    name = "doubleBinaryTree"
    kinds = frozenset((CollectiveKind.ALL_REDUCE,))
    has_one_variant = False
    on_groups = False
    roles_differ = "double binary trees (ranks play different roles)"
    nccl = "tree"

    @classmethod
    def prepare_dim(cls, rank: int, size: int, offset: int, last: bool) -> DoubleBinaryTree:
        """The pair of trees of ``rank`` over a power-of-two dimension."""
        if size & (size - 1):
            raise InputError(
                f"doubleBinaryTree needs a power-of-two dimension, got {size} NPUs", where="all-reduce-implementation"
            )
        start = rank % offset if last else (rank - rank % (offset * size)) + rank % offset
        return DoubleBinaryTree(size, start, offset)

    @classmethod
    def for_dim(cls, kind: CollectiveKind, dim: LogicalDim, data_size: int, direction: Direction) -> PhaseAlgorithm:
        """The next tree's phase (the trees alternate chunk by chunk); whatever ``kind``, a tree
        phase is an all-reduce."""
        if not isinstance(dim.prepared, DoubleBinaryTree):  # a one* form: no trees were built
            raise InputError(f"unsupported collective algorithm {dim.algo.name!r}")
        return cls(dim.prepared.next_tree(), dim.ring.me, data_size)

    def __init__(self, tree: BinaryTree, me: int, data_size: int) -> None:
        self.kind = CollectiveKind.ALL_REDUCE
        self.id = me
        self.data_size = self.final_data_size = data_size
        self.parent, self.left, self.right, self.role = tree.links(me)
        self.state = "begin"
        self.reductions = 0
        self.host: PhaseHost | None = None

    def start(self, host: PhaseHost) -> None:
        self.host = host
        self._run("init")

    def on_general(self) -> None:
        self._run("general")

    def on_packet_received(self) -> None:
        self._run("received")

    def _bundle(self, processing: bool, send_back: bool = False, to_memory: bool = False) -> None:
        assert self.host is not None
        self.host.bundle(False, processing, self.data_size, to_memory, send_back)

    def _run(self, event: str) -> None:
        h = self.host
        assert h is not None
        size = self.data_size
        st, role = self.state, self.role
        if role == "leaf":
            if st == "begin":
                self._bundle(False, to_memory=True)
                self.state = "to_parent"
            elif st == "to_parent":
                h.send(self.parent, size)
                h.recv(self.parent, size)
                self.state = "from_parent"
            elif st == "from_parent":
                self._bundle(False)
                self.state = "end"
            elif st == "end":
                h.phase_done()
        elif role == "inner":
            if st == "begin":
                self.state = "two_children"
                h.recv(self.left, size)
                h.recv(self.right, size)
            elif st == "two_children" and event == "received":
                self._bundle(True)
                self.state = "one_child"
            elif st == "one_child" and event == "received":
                self._bundle(True, send_back=True)
                self.state = "to_parent"
            elif self.reductions < 1 and event == "general":
                self.reductions += 1
            elif st == "to_parent":
                self.state = "from_parent"
                h.send(self.parent, size)
                h.recv(self.parent, size)
            elif st == "from_parent" and event == "received":
                self._bundle(True, send_back=True)
                self.state = "to_children"
            elif st == "to_children":
                h.send(self.left, size)
                h.send(self.right, size)
                h.phase_done()
        else:  # root: one child
            child = self.left if self.left >= 0 else self.right
            if st == "begin":
                self.state = "one_child"
                h.recv(child, size)
            elif st == "one_child":
                self._bundle(True, send_back=True)
                self.state = "to_children"
            elif st == "to_children":
                h.send(child, size)
                h.phase_done()

"""Collective algorithms: how a collective becomes phases of point-to-point transfers plus
local reduction work.

The algorithms here are written as per-rank state machines that talk to their surroundings
only through :class:`~podsim.collectives.base.PhaseHost` (send, receive, memory bus), so the
engine drives them and they know nothing of the engine or the network.  NCCL's algorithms
(:mod:`.nccl`) build schedules of flows instead.  Both kinds are found by name in
:mod:`.registry`; importing this package registers every algorithm below.
"""

# ASTRA-sim's algorithms register as they are imported: in the order a system JSON's error lists them
from . import ring  # noqa: I001, F401
from . import direct  # noqa: F401
from . import halving_doubling  # noqa: F401
from . import double_binary_tree  # noqa: F401
from .nccl import algorithms  # noqa: F401  (NCCL's, registered in the order the selector tries them)

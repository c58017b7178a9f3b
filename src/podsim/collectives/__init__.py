"""Collective algorithms: how a collective becomes phases of point-to-point transfers plus
local reduction work.

The algorithms here are written as per-rank state machines that talk to their surroundings
only through :class:`~podsim.collectives.base.PhaseHost` (send, receive, memory bus), so the
engine drives them and they know nothing of the engine or the network.
"""

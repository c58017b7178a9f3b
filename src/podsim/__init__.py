"""podsim: simulate distributed deep learning on GPU clusters.

>>> import podsim
>>> res = podsim.simulate(workload=..., system=..., network=...)   # doctest: +SKIP
"""

__version__ = "0.1.0"

from .api import collective, simulate  # noqa: E402
from .report.result import RankResult, Result  # noqa: E402

__all__ = ["collective", "simulate", "Result", "RankResult", "__version__"]

"""Print the efficiency scale factors podsim derives for GPUs it has not measured itself.

Each derived GPU in ``hardware/gpus.yaml`` (``efficiency: {from: <gpu>, scale: ..., measured_as: ...}``)
scales its sibling's fitted ceilings by how the two compare in published kernel benchmarks
(``hardware/published_kernels.csv``; podsim/compute/derive.py says how).  This prints, per GPU and
parameter, the factor the rows give, the pairs behind it and the factor gpus.yaml ships, so an
edited rows file can be carried into gpus.yaml by hand.

    python scripts/derive_efficiency.py [--rows my_kernels.csv]
"""

from __future__ import annotations

import argparse

from podsim.compute.derive import efficiency_scale, published_kernels
from podsim.hardware.gpu import gpu_specs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", help="published kernel rows (default: the shipped ones)")
    args = ap.parse_args()
    specs = gpu_specs()
    rows = published_kernels(args.rows)
    print(f"{'gpu':8} {'parameter':14} {'from rows':>9} {'pairs':>5} {'shipped':>8}  measured as")
    for key, g in specs.items():
        if not g.efficiency_scale:
            continue
        derived = efficiency_scale(key, g.efficiency_from, specs, rows, g.efficiency_measured_as)
        for p in sorted(set(derived) | set(g.efficiency_scale)):
            f, n = derived.get(p, (float("nan"), 0))
            print(
                f"{key:8} {p:14} {f:9.3f} {n:5d} {g.efficiency_scale.get(p, float('nan')):8.3f}  "
                f"{g.efficiency_measured_as.get(p, key)}"
            )


if __name__ == "__main__":
    main()

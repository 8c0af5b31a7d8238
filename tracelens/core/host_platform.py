"""What the host's CPU allows the GPU's PCIe link: its generation and lanes.

A GPU's link runs at the lower of what the card and the host support. An RTX 3060 is a
PCIe 4.0 card, but on an AMD Ryzen 5 4600G (a Renoir desktop APU, PCIe 3.0 only) its
copies reach PCIe 3.0 rates, half what the card alone suggests. Nsight Systems exports
name the CPU (``TARGET_INFO_SYSTEM_ENV.CpuDescription``, kept as ``trace_info.host_cpu``);
only CPUs known to cap the link are listed, so an unlisted one leaves the card's link.
Platforms whose link depends on the board (a Ryzen 3000 desktop CPU runs PCIe 4.0 on an
X570 board, 3.0 on a B450) are not listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class HostCap:
    gen: int  # highest PCIe generation the CPU's lanes run
    lanes: int  # the most lanes it gives one GPU slot
    platform: str  # what the CPU is, for the basis


# (pattern on the CPU description, cap). First match wins.
_CAPS: tuple[tuple[str, HostCap], ...] = (
    (r"Ryzen \d (PRO )?[45]\d\d0G", HostCap(3, 16, "a Renoir/Cezanne desktop APU")),
    (r"Ryzen \d (PRO )?[23]\d\d0G", HostCap(3, 8, "a Raven Ridge/Picasso desktop APU")),
    (r"EPYC 7\d\d1\b", HostCap(3, 16, "a first-generation EPYC (Naples)")),
    (r"Xeon\(R\) CPU E[57]-\d{4}", HostCap(3, 16, "a Xeon E5/E7")),
    (
        r"Xeon\(R\) (Platinum|Gold|Silver|Bronze) \d[12]\d\d",
        HostCap(3, 16, "a first- or second-generation Xeon Scalable (Skylake/Cascade Lake)"),
    ),
    (r"Core\(TM\) i[3579]-([3-9]\d{3}|10\d{3})", HostCap(3, 16, "a 3rd- to 10th-generation Core")),
)


def host_pcie_cap(cpu: str | None) -> HostCap | None:
    """The cap the host's CPU puts on a GPU's PCIe link; None where none is known."""
    if not cpu:
        return None
    for pattern, cap in _CAPS:
        if re.search(pattern, cpu):
            return cap
    return None

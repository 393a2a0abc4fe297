"""fp8 scaling recipe descriptions (configuration only: habana_torch has no
fp8, see the package docstring)."""
import dataclasses
import enum


class Format(enum.Enum):
    """The fp8 formats a recipe may name: E4M3 everywhere, E5M2 everywhere,
    or HYBRID (E4M3 forward, E5M2 backward)."""
    E4M3 = "E4M3"
    E5M2 = "E5M2"
    HYBRID = "HYBRID"


@dataclasses.dataclass
class DelayedScaling:
    """A delayed-scaling fp8 recipe: scales come from a history of amax values."""
    margin: int = 0
    interval: int = 1
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1
    amax_compute_algo: str = "most_recent"
    reduce_amax: bool = True

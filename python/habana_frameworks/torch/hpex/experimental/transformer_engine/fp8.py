"""fp8 availability, as Gaudi's transformer engine reports it."""

_REASON = "habana_torch has no fp8 dtypes or kernels (its hpu computes in fp32, bf16 and fp16)"


def is_fp8_available():
    """Returns (available, reason): always (False, why) on habana_torch."""
    return False, _REASON

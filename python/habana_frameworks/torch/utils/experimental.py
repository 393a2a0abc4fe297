"""habana_frameworks.torch.utils.experimental: the device generation.

The cards report the Gaudi generation that HPU_DEVICE_TYPE names (GAUDI,
GAUDI2 by default, or GAUDI3), the same one torch.hpu.get_device_name()
returns, so code that branches on Gaudi 1/2/3 takes one known path."""
import enum

import torch

__all__ = ["synDeviceType"]


class synDeviceType(enum.IntEnum):
    """The Gaudi generations (the members' names are Gaudi's)."""
    synDeviceGaudi = 1
    synDeviceGaudi2 = 2
    synDeviceGaudi3 = 3


_BY_NAME = {"GAUDI": synDeviceType.synDeviceGaudi, "GAUDI2": synDeviceType.synDeviceGaudi2,
            "GAUDI3": synDeviceType.synDeviceGaudi3}


def _get_device_type():
    """The synDeviceType of the cards (from HPU_DEVICE_TYPE)."""
    return _BY_NAME[torch.hpu._device_type_name()]


def _is_fp16_supported():
    """False on Gaudi 1 (HPU_DEVICE_TYPE=GAUDI), True from Gaudi 2 on. The
    fp16 kernels run here whatever the setting; this answers for the
    generation the cards report."""
    return _get_device_type() != synDeviceType.synDeviceGaudi

import torch


def _get_device_index(device, optional=False, allow_cpu=False):
    """Card index of `device` (int, str or torch.device). None -> current
    card if optional, as torch.cuda._utils._get_device_index."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != "hpu":
            raise ValueError(f"Expected an hpu device, but got: {device}")
        device = device.index
    if device is None:
        if optional:
            from . import current_device

            return current_device()
        raise ValueError("Expected an hpu device with a specified index or an integer, but got: None")
    if not isinstance(device, int):
        raise TypeError(f"hpu device must be an int, str or torch.device, got {type(device).__name__}")
    if device == -1 and optional:
        from . import current_device

        return current_device()
    from .. import _C

    _C._check_device(device)
    return device

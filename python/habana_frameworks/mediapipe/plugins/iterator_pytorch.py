"""The media pipeline's PyTorch iterators: refuse to be constructed on habana_torch."""


class HPUResnetPytorchIterator:
    def __init__(self, *args, **kwargs):
        from .. import UNAVAILABLE
        raise NotImplementedError(f"HPUResnetPytorchIterator: {UNAVAILABLE}")

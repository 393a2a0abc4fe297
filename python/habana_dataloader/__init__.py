"""habana_dataloader: the name of Gaudi's media-accelerated data loader, which
habana_torch does not have.

lightning-habana imports this package unconditionally when it is imported
(for its HPUDataModule), so it exists; ``HabanaDataLoader`` refuses to be
constructed with a NotImplementedError saying what to use instead
(torch.utils.data.DataLoader, which works with the hpu as on any device).
"""
from . import habana_dataset  # noqa: F401

UNAVAILABLE = ("habana_torch has no Habana media data loader (it decodes and augments images on Gaudi's media "
               "engine); use torch.utils.data.DataLoader")


class HabanaDataLoader:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"HabanaDataLoader: {UNAVAILABLE}")

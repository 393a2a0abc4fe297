"""Datasets of Gaudi's media data loader: refuse to be constructed on habana_torch."""


class ImageFolderWithManifest:
    def __init__(self, *args, **kwargs):
        from . import UNAVAILABLE
        raise NotImplementedError(f"ImageFolderWithManifest: {UNAVAILABLE}")

"""MediaPipe: a base class that refuses to be constructed on habana_torch."""


class MediaPipe:
    def __init__(self, *args, **kwargs):
        from . import UNAVAILABLE
        raise NotImplementedError(f"{type(self).__name__}: {UNAVAILABLE}")

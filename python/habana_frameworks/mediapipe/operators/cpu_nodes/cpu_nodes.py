"""media_function: the base of the media pipeline's CPU-side functions. It is
importable and subclassable, but only a MediaPipe (which cannot be built on
habana_torch) ever calls one."""


class media_function:  # noqa: N801  (Gaudi's public name)
    def __init__(self, params=None):
        self.params = params

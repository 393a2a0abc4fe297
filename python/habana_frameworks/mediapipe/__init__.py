"""habana_frameworks.mediapipe: the names of Gaudi's media pipeline, none of
which works on habana_torch.

Gaudi's media pipeline decodes and augments images on the card's media
engine, hardware habana_torch does not model. The modules and names exist
because lightning-habana imports them unconditionally when it is imported
(its ResNet media-pipe data loader subclasses ``MediaPipe``); constructing a
pipeline or its iterator raises NotImplementedError, so nothing can run on
them by mistake. Load data with torch.utils.data.DataLoader instead.
"""
from . import fn  # noqa: F401
from .mediapipe import MediaPipe  # noqa: F401

UNAVAILABLE = ("habana_torch has no media pipeline (Gaudi's media engine decodes and augments images on the card); "
               "load data with torch.utils.data.DataLoader")

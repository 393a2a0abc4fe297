"""Streams and events of the cards.

All streams of a card share the card's one in-order queue, so work is
ordered across them; the API is torch's generic Stream/Event (c10 calls
our guard), with torch.cuda-style helpers around it.
"""
import torch

from .. import _C
from . import _utils


class Stream(torch.Stream):
    """An hpu stream. ``Stream()`` takes one from the current card's pool."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:  # rebuilt from (stream_id, device_index, device_type)
            return super().__new__(cls, **kwargs)
        from . import _lazy_init

        _lazy_init()
        idx = _utils._get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device("hpu", idx), priority=priority)


class _EventMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "hpu"


class Event(metaclass=_EventMeta):
    """An hpu event; ``enable_timing=True`` allows ``elapsed_time``.

    Returns a plain ``torch.Event`` on the hpu (PyTorch's event methods
    accept only that exact type), and ``isinstance(e, torch.hpu.Event)``
    holds for it.
    """

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        from . import _lazy_init

        _lazy_init()
        return torch.Event(device="hpu", enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


_HPU_DEVICE_TYPE = 15  # c10::DeviceType::HPU


def current_stream(device=None):
    from . import _lazy_init

    _lazy_init()
    stream_id, idx = _C._current_stream(_utils._get_device_index(device, optional=True))
    return Stream(stream_id=stream_id, device_index=idx, device_type=_HPU_DEVICE_TYPE)


def default_stream(device=None):
    from . import _lazy_init

    _lazy_init()
    idx = _utils._get_device_index(device, optional=True)
    return Stream(stream_id=0, device_index=idx, device_type=_HPU_DEVICE_TYPE)


def set_stream(stream):
    if stream is None:
        return
    _C._set_stream(stream.stream_id, stream.device_index)


class stream:
    """Context manager that makes `stream` current on its card."""

    def __init__(self, s):
        self.stream = s
        self.prev = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.prev = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.prev is not None:
            set_stream(self.prev)
        return False


# Tensor.record_stream on the hpu. A card's streams are logical ids on its one
# in-order queue, and a freed block is reused only by work queued after
# every earlier reader (docs/ARCHITECTURE.md, "The card's queue"), so a block
# used on another stream is already safe from early reuse: there is nothing
# to record. (DeepSpeed's ZeRO-3 calls it when it frees a partitioned
# parameter.) Without this kernel the op fell through to the CPU, which has
# none.
def _record_stream(tensor, s):
    if s.device.type != "hpu" or s.device.index != tensor.device.index:
        raise ValueError(f"record_stream: the stream must be one of the tensor's card ({tensor.device}), "
                         f"got a stream of {s.device}")


_aten_hpu = torch.library.Library("aten", "IMPL")
_aten_hpu.impl("record_stream", _record_stream, "HPU")

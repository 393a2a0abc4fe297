"""Modules that exist only so libraries built for Gaudi can be imported
(lightning-habana imports them unconditionally): each answers that its
feature is not there, and none can be used by mistake."""
import pytest


def test_transformer_engine_reports_no_fp8():
    import habana_frameworks.torch.hpex.experimental.transformer_engine as te
    from habana_frameworks.torch.hpex.experimental.transformer_engine.recipe import DelayedScaling, Format

    available, reason = te.fp8.is_fp8_available()
    assert available is False and "no fp8" in reason
    assert DelayedScaling().fp8_format is Format.HYBRID
    for name in ("fp8_autocast", "Linear"):  # the fp8 compute API is absent, not faked
        assert not hasattr(te, name)


def test_media_pipe_refuses_to_run():
    from habana_frameworks.mediapipe import fn  # noqa: F401
    from habana_frameworks.mediapipe.media_types import decoderStage, dtype, ftype, imgtype, randomCropType  # noqa
    from habana_frameworks.mediapipe.mediapipe import MediaPipe
    from habana_frameworks.mediapipe.operators.cpu_nodes.cpu_nodes import media_function
    from habana_frameworks.mediapipe.plugins.iterator_pytorch import HPUResnetPytorchIterator

    class Pipe(MediaPipe):  # lightning-habana subclasses it at import
        pass

    with pytest.raises(NotImplementedError, match="Pipe: habana_torch has no media pipeline"):
        Pipe("hpu", 0, 8)
    with pytest.raises(NotImplementedError, match="no media pipeline"):
        HPUResnetPytorchIterator(mediapipe=None)

    class Flip(media_function):
        pass

    assert Flip({"x": 1}).params == {"x": 1}


def test_habana_dataloader_refuses_to_run():
    import torch

    import habana_dataloader

    with pytest.raises(NotImplementedError, match="use torch.utils.data.DataLoader"):
        habana_dataloader.HabanaDataLoader(torch.utils.data.TensorDataset(torch.zeros(4)), batch_size=2)
    with pytest.raises(NotImplementedError, match="no Habana media data loader"):
        habana_dataloader.habana_dataset.ImageFolderWithManifest("/nonexistent")

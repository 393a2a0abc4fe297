"""habana_frameworks: the import path of Gaudi's PyTorch software, over
habana_torch. ``habana_frameworks.torch`` is the package scripts use."""

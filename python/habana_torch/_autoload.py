"""Target of PyTorch's device-backend autoload (the torch.backends entry
point). A submodule, not a function of the package, so that it also resolves
when a script imports habana_torch first: then `import torch` runs the
autoload while habana_torch's own __init__ is still executing."""


def load():
    # Importing this submodule imported (or is importing) habana_torch.
    pass

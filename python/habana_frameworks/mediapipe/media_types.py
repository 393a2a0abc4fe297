"""Media pipeline type names, importable so code that names them loads; they
carry no values because habana_torch has no media pipeline."""


class decoderStage:  # noqa: N801  (Gaudi's public names)
    pass


class dtype:  # noqa: N801
    pass


class ftype:  # noqa: N801
    pass


class imgtype:  # noqa: N801
    pass


class randomCropType:  # noqa: N801
    pass

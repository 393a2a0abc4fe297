"""hl-smi for habana_torch's emulated cards, and the status-page reader the
metrics exporter shares. Kept apart from the habana_torch package because
importing that loads torch, and hl-smi must start in a fraction of a second.
"""

"""habana_frameworks.torch.hpex.experimental: only transformer_engine's fp8
availability query and recipe types (see there); habana_torch has no fp8."""

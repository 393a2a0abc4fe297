"""`python -m habana_torch.exporter --port N | --textfile PATH`: Prometheus
metrics of the cards (python/habana_smi/exporter.py, which reads the status
pages without torch; this name is the documented entry point)."""
import sys

from habana_smi.exporter import main

if __name__ == "__main__":
    sys.exit(main())

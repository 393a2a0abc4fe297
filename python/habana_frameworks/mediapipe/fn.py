"""Media pipeline operators: none on habana_torch (see habana_frameworks.mediapipe)."""

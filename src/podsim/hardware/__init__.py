"""Hardware models and presets (GPUs, memories, nodes)."""

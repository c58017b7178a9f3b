"""podsim: simulate distributed deep learning on GPU clusters."""

__version__ = "0.1.0"

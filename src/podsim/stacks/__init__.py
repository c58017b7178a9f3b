"""Software stacks as data: what the framework adds to the hardware (``stack.py``: presets and
users' files; ``schema.py``: the properties a stack sets; ``rules.py``: framework rules applied
to a layout; ``calibrate.py``: fitting a stack's free parameters to measured runs)."""

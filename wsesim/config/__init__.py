"""What users write: units, errors, frozen specs, strict YAML, and the loader with presets and overrides.

The only layer that touches raw YAML dicts; everything downstream receives frozen specs.
"""

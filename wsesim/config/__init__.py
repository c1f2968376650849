"""What users write: units, errors, frozen specs, strict YAML, and the loader with presets and overrides.

The only layer that touches raw YAML dicts; everything downstream receives frozen specs.
"""

from . import gpu_inference as _gpu_inference  # noqa: E402, F401 - registers serving on a GPU with it
from . import inference as _inference  # noqa: E402, F401 - registers ``kind: inference`` with the loader

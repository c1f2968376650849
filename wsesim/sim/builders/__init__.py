"""The builders of programs, side by side: a training step (``training``) and serving requests
(``serving``). Each writes its workload's order of work once, as shapes; none costs or executes."""

from .serving import serving_program
from .training import training_program

__all__ = ["serving_program", "training_program"]

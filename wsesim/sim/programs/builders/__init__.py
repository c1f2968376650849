"""The builders of programs, side by side: a training step (``training``) and serving requests
(``serving``). Each writes its workload's order of work once, as shapes; none costs or executes. Each is
imported as its own module, so that a training step never loads serving's."""

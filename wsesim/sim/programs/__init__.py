"""What a workload is: a program's ops as data (``program``), the resolved step plan and the trace it
produces (``plan``), the weight-chunk plan (``chunks``), where a served model's stages live (``mapping``), and
the builders that write a training step's or serving's program as shapes (``builders``). Nothing here costs or
runs anything."""

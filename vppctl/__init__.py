"""vppctl: convert pipeline-parallel training programs to virtual pipeline parallelism."""

__version__ = "0.1.0"

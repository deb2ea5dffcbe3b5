"""reb-ray: a Ray-distributed evaluation cluster for environment synthesis.

Implements and extends ResearchEnvBench (arXiv 2603.06739): agents build environments for
research repositories inside Docker sandboxes; hidden probes C0..C5 measure the result.
"""

__version__ = "0.1.0"

"""tinyproj: ridge regression trained by gradient descent."""

__version__ = "0.1.0"

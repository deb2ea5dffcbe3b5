"""Linear regression by gradient descent."""

from linreg.data import make_regression
from linreg.model import LinearModel

__all__ = ["LinearModel", "make_regression"]

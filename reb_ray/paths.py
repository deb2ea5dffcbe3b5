"""Where bundled resources live, in a source checkout and in an installed wheel.

The wheel force-includes `probes/` and `tasks/` under `reb_ray/_bundled/` (`analysis` ships as a package)
(see pyproject.toml); a source checkout or editable install has them at the repository root.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def bundled_dir(name: str) -> Path:
    """Return the directory of bundled resource `name` ("probes" or "tasks").

    Raises FileNotFoundError when neither the checkout nor the wheel layout holds it.
    """
    for candidate in (PACKAGE_DIR.parent / name, PACKAGE_DIR / "_bundled" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"bundled directory {name!r} not found next to {PACKAGE_DIR}")


def images_dir() -> Path:
    """Directory holding the sandbox image Dockerfiles."""
    return PACKAGE_DIR / "images"

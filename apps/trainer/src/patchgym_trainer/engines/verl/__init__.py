"""verl integration: the agent loop (needs the ``verl`` extra) and the launcher.

``patchgym_trainer.engines.verl.agent_loop`` imports verl at module level; import it only
where verl is installed (``pip install 'patchgym-trainer[gpu]'``).
"""

from __future__ import annotations

from patchgym_trainer.errors import MissingExtra

VERL_HINT = (
    "verl is not installed: uv sync --package patchgym-trainer --extra gpu "
    "(GPU node) or --extra cpu (CPU, tests only); pip install 'patchgym-trainer[gpu]'"
)


def require_verl() -> None:
    """Raise :class:`MissingExtra` naming the install command when verl is absent."""
    try:
        import verl  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(VERL_HINT) from exc

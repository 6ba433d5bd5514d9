"""The op families; importing this package declares every op in the registry."""

from . import elementwise as elementwise  # noqa: F401

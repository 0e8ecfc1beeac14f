"""`docker` sandbox backend on the Docker Engine API.

>>> from patchgym_sandbox import create_backend
>>> backend = create_backend({"type": "docker"})
>>> async with backend.sandbox(image="local/bookworm-py") as sb:
...     print((await sb.exec("python3 --version")).output)

Importing this package is cheap; the docker SDK is imported by ``DockerConfig.build()``.
"""

from patchgym_docker.config import DockerConfig
from patchgym_sandbox.retry import RetryPolicy

__version__ = "0.1.0"

__all__ = ["DockerConfig", "RetryPolicy"]

"""A ``cpu`` platform for verl 0.9.1, loaded through ``VERL_USE_EXTERNAL_MODULES``.

verl has no CPU device: ``verl.utils.device.auto_set_device`` keeps ``trainer.device=cpu``
only when the detected platform is ``cpu``, and the built-in platforms are ``nvidia``,
``npu`` and ``rocm``. Registering this one (and ``VERL_PLATFORM=cpu``) makes verl build
its actor on CPU with ``gloo``:

    VERL_USE_EXTERNAL_MODULES=patchgym_trainer.engines.verl.cpu_platform VERL_PLATFORM=cpu \\
      python -m verl.trainer.main_ppo trainer.device=cpu ray_init.num_gpus=1 ...

Ray still schedules verl's workers on a ``GPU`` resource; ``ray_init.num_gpus`` declares a
fake one. How far this gets (and the walls after it) is in the trainer README; a full
PPO step on CPU is not reached with verl 0.9.1 (``train.engine=trl`` is the CPU engine).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry


class _NoDevice(ModuleType):
    """What verl calls on ``get_torch_device()`` (``torch.cuda``-like), as CPU no-ops."""

    def __init__(self) -> None:
        super().__init__("patchgym_cpu_device")

    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def device_count(self) -> int:
        return 1

    def set_device(self, *_: Any) -> None:
        return None

    def synchronize(self, *_: Any) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def ipc_collect(self) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def memory_allocated(self, *_: Any) -> int:
        return 0

    def memory_reserved(self, *_: Any) -> int:
        return 0

    def max_memory_allocated(self, *_: Any) -> int:
        return 0

    def max_memory_reserved(self, *_: Any) -> int:
        return 0

    def reset_peak_memory_stats(self, *_: Any) -> None:
        return None

    def mem_get_info(self, *_: Any) -> tuple[int, int]:
        import os

        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return pages * size, pages * size

    def get_rng_state(self, *_: Any) -> torch.Tensor:
        return torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor, *_: Any) -> None:
        torch.set_rng_state(state)


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """CPU tensors, ``gloo`` collectives, no IPC, a fake ``GPU`` Ray resource."""

    _device = _NoDevice()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return self._device

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return not torch.cuda.is_available()

    def current_device(self) -> int:
        return 0

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None

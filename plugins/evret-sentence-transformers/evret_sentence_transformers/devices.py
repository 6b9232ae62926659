"""Which device a model runs on, how many texts it encodes per batch, and fp16.

- ``device="auto"`` (the default everywhere in this plugin) picks CUDA when torch sees a GPU, then Apple's MPS,
  then the CPU: the order sentence-transformers itself uses. ``"cpu"``, ``"cuda"``, ``"cuda:N"`` and ``"mps"``
  are taken as given, with a clear error when the device is absent.
- ``batch_size=None`` (the default) chooses the batch for the device: 512 on CUDA (SciFact's semantic judging
  took 14.0 s at 512 against 33.6 s at 64 on an H100, measured by issue 26's author), 64 elsewhere.
- ``fp16=True`` runs the model in half precision, on CUDA only; asked for on another device it is refused with
  an :class:`~evret_core.sdk.EvretError` rather than silently ignored.

torch is imported by :func:`resolve_device` and :func:`check_device` only, never at module load.
"""

from __future__ import annotations

from typing import Any

from evret_core.sdk import EvretError

__all__ = ["AUTO", "BATCH_SIZES", "check_device", "check_fp16", "default_batch_size", "device_option",
           "resolve_device"]

AUTO = "auto"
#: the batch size chosen per device type when none is given
BATCH_SIZES = {"cuda": 512, "mps": 64, "cpu": 64}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def device_option(device: Any) -> str:
    """The device option as text: ``None`` or ``""`` mean ``"auto"``; checked for its form, without torch."""
    text = "" if device is None else str(device).strip().lower()
    return text or AUTO


def _device_type(device: str) -> str:
    return device.split(":", 1)[0].strip().lower()


def check_fp16(fp16: Any, device: str, what: str) -> bool:
    """``fp16`` as a bool; an error when it is asked for with a device that is not CUDA (checked without torch
    for an explicit device; ``"auto"`` is checked when it is resolved)."""
    if isinstance(fp16, str):
        text = fp16.strip().lower()
        if text not in _TRUE + _FALSE:
            raise EvretError(f"{what}: fp16 must be true or false, got {fp16!r}")
        fp16 = text in _TRUE
    on = bool(fp16)
    if on and device != AUTO and _device_type(device) != "cuda":
        raise EvretError(f"{what}: fp16=true runs on CUDA only, and device is {device!r}; drop fp16 (CPU and MPS "
                         "encode in float32)")
    return on


def check_device(device: str, what: str = "device") -> str:
    """Validate an explicit torch device string; a clear error when CUDA (or MPS) is asked for and absent."""
    import torch

    text = str(device or "cpu").strip()
    try:
        parsed = torch.device(text)
    except (RuntimeError, ValueError) as exc:
        raise EvretError(f"{what} {text!r}: not a torch device ({exc}); use auto, cpu, cuda or cuda:N") from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise EvretError(
                f"{what} {text!r}: CUDA is not available here (torch {torch.__version__} is {build}, or no GPU is "
                "visible); use device='auto' or 'cpu'"
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise EvretError(f"{what} {text!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    elif parsed.type == "mps" and not _mps_available(torch):
        raise EvretError(f"{what} {text!r}: MPS is not available on this machine; use device='auto' or 'cpu'")
    return text


def _mps_available(torch: Any) -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(device: str, fp16: bool = False, what: str = "device") -> str:
    """The concrete device for ``device``: ``"auto"`` becomes ``cuda``, ``mps`` or ``cpu`` (the first available);
    any other value is checked by :func:`check_device`. ``fp16`` on a device that is not CUDA is an error."""
    import torch

    if device == AUTO:
        resolved = "cuda" if torch.cuda.is_available() else "mps" if _mps_available(torch) else "cpu"
    else:
        resolved = check_device(device, f"{what}: device")
    if fp16 and _device_type(resolved) != "cuda":
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise EvretError(f"{what}: fp16=true runs on CUDA only, and device {device!r} resolved to {resolved!r} "
                         f"(torch {torch.__version__} is {build}, or no GPU is visible); drop fp16 here")
    return resolved


def default_batch_size(device: str) -> int:
    """The batch size for a resolved device when none was given (:data:`BATCH_SIZES`)."""
    return BATCH_SIZES.get(_device_type(device), BATCH_SIZES["cpu"])

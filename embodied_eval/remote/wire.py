"""The openpi wire encoding: msgpack, numpy arrays as tagged maps.

An array travels as a map `{"__ndarray__": True, "data": <raw bytes>, "dtype": <dtype.str>,
"shape": [..]}`, a numpy scalar as `{"__npgeneric__": True, "data": <item>, "dtype": <dtype.str>}`.
The tag keys are written as msgpack *bin* strings, as openpi's own packer does, and read in
either form. Object, void and complex dtypes are refused (they do not round-trip safely).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgpack
import numpy as np

_REFUSED_KINDS = ("O", "V", "c")


def _encode(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in _REFUSED_KINDS:
        raise ValueError(f"cannot send an array of dtype {obj.dtype} (object/void/complex)")
    if isinstance(obj, np.ndarray):
        return {
            b"__ndarray__": True,
            b"data": np.ascontiguousarray(obj).tobytes(),
            b"dtype": obj.dtype.str,
            b"shape": list(obj.shape),
        }
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def _field(obj: dict[Any, Any], key: bytes) -> Any:
    """A tag map's field, under its bytes key (openpi's packer) or its str key."""
    value = obj.get(key)
    return obj[key.decode()] if value is None else value


@lru_cache(maxsize=64)
def _dtype(spec: Any) -> np.dtype[Any]:
    dtype = np.dtype(spec)
    if dtype.kind in _REFUSED_KINDS:
        raise ValueError(f"refusing an array or scalar of dtype {dtype}")
    return dtype


def _decode(obj: dict[Any, Any]) -> Any:
    if obj.get(b"__ndarray__") or obj.get("__ndarray__"):
        data = np.frombuffer(_field(obj, b"data"), dtype=_dtype(_field(obj, b"dtype")))
        return data.reshape(_field(obj, b"shape"))
    if obj.get(b"__npgeneric__") or obj.get("__npgeneric__"):
        return _dtype(_field(obj, b"dtype")).type(_field(obj, b"data"))
    return obj


def pack(message: Any) -> bytes:
    """Encode a message (dicts, lists, numbers, strings, numpy arrays and scalars)."""
    return msgpack.packb(message, default=_encode, use_bin_type=True)


def unpack(data: bytes) -> Any:
    """Decode a message packed by `pack` or by openpi's packer.

    Map keys that arrive as bytes (openpi packs its tags that way) are left as they are inside
    arrays' tag maps; top-level string keys stay strings.
    """
    return msgpack.unpackb(data, object_hook=_decode, raw=False, strict_map_key=False)

"""The camera frame a running harness published, as the console's page shows it (JPEG)."""

from __future__ import annotations

import io
from typing import Any


def frame_jpeg(image: Any, quality: int = 80) -> bytes:
    """An RGB frame as a JPEG.

    Args:
        image: (h, w, 3) or (h, w, 4) uint8 array; a fourth channel is dropped.
        quality: the JPEG quality, 1–95.
    """
    import numpy as np
    from PIL import Image

    picture = Image.fromarray(np.ascontiguousarray(np.asarray(image)[..., :3]).astype(np.uint8))
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=quality)
    return out.getvalue()

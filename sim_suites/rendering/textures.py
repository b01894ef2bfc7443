"""The texture bank both engines draw from: `object_texture` and `table_texture` pick one.

Each texture is a small RGB image made here from a fixed recipe (two colours and a pattern), so
MuJoCo (a 2-D texture on a material) and PyBullet (the same image written once as a PNG file and
loaded by TinyRenderer) show the same picture. Knob value k ∈ 1..TEXTURE_CHOICES picks
`TEXTURES[k - 1]` (the protocol's TEXTURE_CHOICES is its length); 0 keeps the nominal flat colour. A textured geom is drawn in the texture's
colours (its own colour is replaced, not tinted): a colour/texture swap of the part or the table.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Texture images are TEXTURE_PX × TEXTURE_PX pixels.
TEXTURE_PX = 32

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class TextureRecipe:
    """A two-colour pattern: "checker" (squares of `period` px), "stripes" (bands of `period`
    px across the rows), "diagonal" (bands along the diagonal) or "speckle" (a fixed pattern of
    dots, one in four pixels)."""

    name: str
    pattern: str
    first: RGB
    second: RGB
    period: int = 8


TEXTURES: tuple[TextureRecipe, ...] = (
    TextureRecipe("grey_checker", "checker", (200, 200, 200), (70, 70, 70)),
    TextureRecipe("wood_stripes", "stripes", (150, 105, 60), (110, 70, 35), 4),
    TextureRecipe("blue_checker", "checker", (40, 70, 200), (235, 235, 235), 4),
    TextureRecipe("red_stripes", "stripes", (205, 45, 45), (245, 245, 245), 8),
    TextureRecipe("green_speckle", "speckle", (50, 160, 60), (20, 60, 25)),
    TextureRecipe("hazard_diagonal", "diagonal", (240, 200, 20), (25, 25, 25), 8),
)


def texture_image(recipe: TextureRecipe) -> np.ndarray:
    """The (TEXTURE_PX, TEXTURE_PX, 3) uint8 image of a recipe (row 0 at the top)."""
    rows, cols = np.mgrid[0:TEXTURE_PX, 0:TEXTURE_PX]
    p = recipe.period
    if recipe.pattern == "checker":
        second = (rows // p + cols // p) % 2 == 1
    elif recipe.pattern == "stripes":
        second = (rows // p) % 2 == 1
    elif recipe.pattern == "diagonal":
        second = ((rows + cols) // p) % 2 == 1
    else:  # speckle: a fixed pattern (a linear congruence), the same in every process
        second = (rows * 7 + cols * 13 + rows * cols) % 4 == 0
    image = np.empty((TEXTURE_PX, TEXTURE_PX, 3), dtype=np.uint8)
    image[...] = recipe.first
    image[second] = recipe.second
    return image


def png_bytes(image: np.ndarray) -> bytes:
    """A minimal PNG file (8-bit RGB, no interlace) of an (h, w, 3) uint8 image."""
    height, width, _ = image.shape
    raw = b"".join(b"\x00" + image[r].tobytes() for r in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


#: A plain white texture: what an untextured shape is drawn with in PyBullet.
PLAIN = TextureRecipe("plain", "stripes", (255, 255, 255), (255, 255, 255))


@functools.lru_cache(maxsize=2)
def texture_files(plain: bool = False) -> tuple[Path, ...]:
    """The bank as PNG files (PyBullet loads textures from files), written once per process;
    with `plain`, the one white texture instead."""
    folder = Path(tempfile.mkdtemp(prefix="sim-textures-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    paths = []
    for recipe in (PLAIN,) if plain else TEXTURES:
        path = folder / f"{recipe.name}.png"
        path.write_bytes(png_bytes(texture_image(recipe)))
        paths.append(path)
    return tuple(paths)


def box_obj_text(half: tuple[float, ...], repeat_per_m: float = 0.0) -> str:
    """A box of half extents `half` (m) as Wavefront OBJ text with texture coordinates.

    Each face carries the whole texture once (`repeat_per_m` = 0) or the texture repeated every
    1 / `repeat_per_m` metres along the face (a table top): what MuJoCo's materials do for the
    parts and the table, for renderers (PyBullet's TinyRenderer) that need the coordinates.
    """
    hx, hy, hz = (float(v) for v in half)
    lines: list[str] = []
    faces: list[str] = []
    # (normal axis, sign): each face as 4 corners in counter-clockwise order seen from outside.
    for axis in range(3):
        for sign in (1.0, -1.0):
            u_axis, v_axis = [a for a in range(3) if a != axis]
            if sign < 0:
                u_axis, v_axis = v_axis, u_axis
            ext = (hx, hy, hz)
            corners = []
            for du, dv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                p = [0.0, 0.0, 0.0]
                p[axis] = sign * ext[axis]
                p[u_axis] = du * ext[u_axis]
                p[v_axis] = dv * ext[v_axis]
                corners.append(p)
            su = 2 * ext[u_axis] * repeat_per_m if repeat_per_m else 1.0
            sv = 2 * ext[v_axis] * repeat_per_m if repeat_per_m else 1.0
            n = [0.0, 0.0, 0.0]
            n[axis] = sign
            base = len(lines) // 3
            for (du, dv), p in zip(((0, 0), (1, 0), (1, 1), (0, 1)), corners, strict=True):
                lines.append(f"v {p[0]:.6f} {p[1]:.6f} {p[2]:.6f}")
                lines.append(f"vt {du * su:.6f} {dv * sv:.6f}")
                lines.append(f"vn {n[0]:.1f} {n[1]:.1f} {n[2]:.1f}")
            a, b, c, d = (base + k + 1 for k in range(4))
            faces.append(f"f {a}/{a}/{a} {b}/{b}/{b} {c}/{c}/{c}")
            faces.append(f"f {a}/{a}/{a} {c}/{c}/{c} {d}/{d}/{d}")
    return "\n".join([*lines, *faces]) + "\n"


@functools.lru_cache(maxsize=64)
def box_mesh_file(half: tuple[float, ...], repeat_per_m: float = 0.0) -> Path:
    """`box_obj_text` written once per process as an OBJ file (PyBullet loads meshes from
    files); the file sits beside the texture files."""
    folder = texture_files(plain=True)[0].parent
    key = "_".join(f"{v:.5f}" for v in (*half, repeat_per_m))
    path = folder / f"box_{key}.obj"
    path.write_text(box_obj_text(half, repeat_per_m), encoding="utf-8")
    return path

# SPDX-License-Identifier: Apache-2.0
"""ctypes declarations of libforesight-client (client/include/foresight/foresight.h).

Every struct here mirrors the C header field for field; the sizes are
checked in tests/test_client.py.  The library is found, in order, through
$FORESIGHT_LIB (a path), ctypes.util.find_library("foresight-client"), then
the usual install directories.
"""

import ctypes
import ctypes.util
import os

c_u16 = ctypes.c_uint16
c_u32 = ctypes.c_uint32
c_u64 = ctypes.c_uint64
c_vp = ctypes.c_void_p


class ClientOpts(ctypes.Structure):
    _fields_ = [
        ("socket_path", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("model", ctypes.c_char_p),
        ("ring_entries", c_u32),
        ("no_reattach", ctypes.c_int),
    ]


class ModelInfoC(ctypes.Structure):
    _fields_ = [
        ("layers", c_u32),
        ("experts", c_u32),
        ("experts_used", c_u32),
        ("cards", c_u32),
        ("max_expert_bytes", c_u64),
        ("model", ctypes.c_char * 64),
    ]


class CardInfoC(ctypes.Structure):
    _fields_ = [
        ("id", c_u32),
        ("slots", c_u32),
        ("slot_bytes", c_u64),
        ("kind", c_u32),  # library 0.7: FS_CARD_HOST 0, FS_CARD_CUDA 1 (was is_cuda, same values)
        ("name", ctypes.c_char * 40),
        ("down", c_u32),  # library 0.2: 1 once the card is down
    ]


class ViewC(ctypes.Structure):
    _fields_ = [
        ("epoch", c_u64),
        ("att_", c_vp),
        ("tab_", c_vp),
        ("hold_", ctypes.c_int),
    ]


class SlotC(ctypes.Structure):
    _fields_ = [
        ("card", c_u32),
        ("slot", c_u32),
        ("gen", c_u32),
        ("host", c_vp),
        ("device", c_vp),
        ("bytes", c_u64),
    ]


class ExpertBlobC(ctypes.Structure):
    _fields_ = [
        ("data", c_vp),
        ("bytes", c_u64),
        ("checksum", c_u64),
    ]


class ExpertPartC(ctypes.Structure):
    _fields_ = [
        ("role", c_u16),
        ("what", c_u16),
        ("ggml_type", c_u32),
        ("offset", c_u64),
        ("bytes", c_u64),
        ("ne", c_u64 * 2),
    ]


# What the C header promises (x86-64 / aarch64 Linux, LP64).
EXPECTED_SIZES = {
    ClientOpts: 32,
    ModelInfoC: 88,
    CardInfoC: 64,
    ViewC: 32,
    SlotC: 40,
    ExpertBlobC: 24,
    ExpertPartC: 40,
}

_SEARCH_DIRS = (
    "/usr/local/lib",
    "/usr/local/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
)
_NAMES = ("libforesight-client.so", "libforesight-client.so.0")


def candidates():
    """Where the library is looked for, in order."""
    out = []
    env = os.environ.get("FORESIGHT_LIB")
    if env:
        out.append(env)
    found = ctypes.util.find_library("foresight-client")
    if found:
        out.append(found)
    for d in _SEARCH_DIRS:
        for n in _NAMES:
            out.append(os.path.join(d, n))
    # A source checkout: client/python/foresight -> build/client.
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, "..", "..", "..", "build", "client", "libforesight-client.so"))
    return out


def _declare(lib):
    """argtypes/restype of every function the binding calls."""
    P = ctypes.POINTER
    f = lib
    sig = {
        "fs_client_open": (ctypes.c_int, [P(c_vp), P(ClientOpts)]),
        "fs_client_close": (None, [c_vp]),
        "fs_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "fs_client_last_error": (ctypes.c_char_p, [c_vp]),
        "fs_client_model": (ctypes.c_int, [c_vp, P(ModelInfoC)]),
        "fs_client_card": (ctypes.c_int, [c_vp, c_u32, P(CardInfoC)]),
        "fs_client_attached": (ctypes.c_int, [c_vp]),
        "fs_client_attach_count": (c_u64, [c_vp]),
        "fs_post_predict": (ctypes.c_int, [c_vp, c_u32, c_u32, c_u32, c_u32, ctypes.c_float, ctypes.c_uint, ctypes.c_int]),
        "fs_post_usage": (ctypes.c_int, [c_vp, c_u32, c_u32, c_u32, c_u32, ctypes.c_int]),
        "fs_window_begin": (ctypes.c_int, [c_vp, c_u32, c_u32]),
        "fs_window_end": (ctypes.c_int, [c_vp, c_u32]),
        "fs_client_dropped": (c_u64, [c_vp]),
        "fs_client_redials": (c_u64, [c_vp]),
        "fs_acquire": (ctypes.c_int, [c_vp, P(ViewC)]),
        "fs_release": (None, [c_vp, P(ViewC)]),
        "fs_lookup": (ctypes.c_int, [c_vp, P(ViewC), c_u32, c_u32, c_u32, P(SlotC)]),
        "fs_lookup_live": (ctypes.c_int, [c_vp, P(ViewC), c_u32, c_u32, c_u32, P(SlotC)]),
        "fs_slot_ready": (ctypes.c_int, [c_vp, P(SlotC)]),
        "fs_slot_issued_ns": (c_u64, [c_vp, P(SlotC)]),
        "fs_card_ready_words": (c_vp, [c_vp, c_u32]),
        "fs_arena_expert": (ctypes.c_int, [c_vp, c_u32, c_u32, P(ExpertBlobC)]),
        "fs_layer_ready": (ctypes.c_int, [c_vp, c_u32]),
        "fs_arena_pin": (c_vp, [c_vp]),
        "fs_arena_unpin": (None, [c_vp, c_vp]),
        "fs_checksum": (c_u64, [c_vp, ctypes.c_size_t]),
        "fs_arena_expert_parts": (ctypes.c_int, [c_vp, c_u32, c_u32, P(ExpertPartC), ctypes.c_uint]),
        "fs_client_stats_json": (ctypes.c_int, [c_vp, ctypes.c_char_p, ctypes.c_size_t]),
        "fs_card_device": (ctypes.c_int, [c_vp, c_u32]),
        "fs_open_error": (ctypes.c_char_p, []),
    }
    missing = []
    for name, (res, args) in sig.items():
        try:
            fn = getattr(f, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = res
        fn.argtypes = args
    return missing


def load(path=None):
    """Load the library: `path`, else the search order above.  Returns
    (CDLL, path).  Raises OSError naming every place tried."""
    tried = []
    for p in [path] if path else candidates():
        try:
            lib = ctypes.CDLL(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
            continue
        missing = _declare(lib)
        if missing:
            tried.append("%s (too old: lacks %s)" % (p, ", ".join(missing)))
            continue
        return lib, p
    raise OSError("libforesight-client not found; set FORESIGHT_LIB to its path. Tried: " + "; ".join(tried))

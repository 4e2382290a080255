# SPDX-License-Identifier: Apache-2.0
"""foresight: Python binding of libforesight-client (pure ctypes).

    import foresight
    with foresight.Client(socket="/run/foresight/control.sock", name="my-engine") as c:
        with c.window(w, tokens=1), c.acquire() as view:
            c.post_predict(w, layer + 1, e, score=0.9)
            s = view.lookup(card, layer, e)
            if s is not None:
                t = torch.from_dlpack(s.dlpack("bfloat16"))      # the slot, no copy
            else:
                t = torch.from_dlpack(c.arena_expert(layer, e).dlpack("bfloat16"))  # CPU path
            c.post_usage(w, layer, e, hit=s is not None, card=card)

The library is found through $FORESIGHT_LIB, then ctypes.util.find_library,
then the usual install directories.  Failures raise foresight.Error (or a
subclass) carrying the library's message.
"""

from .client import (
    ANY_CARD,
    GGML_BF16,
    GGML_DTYPES,
    GGML_F16,
    GGML_F32,
    HORIZON_MAX,
    ROLE_DOWN,
    ROLE_GATE,
    ROLE_GATE_UP,
    ROLE_NAMES,
    ROLE_UP,
    SOURCE_HOST,
    SOURCE_KERNEL,
    SOURCE_ROUTER_AHEAD,
    WHAT_BIAS,
    WHAT_NAMES,
    WHAT_SCALE,
    WHAT_WEIGHT,
    Blob,
    Busy,
    CardInfo,
    Client,
    Closed,
    ConnectError,
    Error,
    InvalidArgument,
    LibraryNotFound,
    ModelInfo,
    Part,
    Slot,
    View,
    checksum,
    library,
    library_path,
    strerror,
)
from .dlpack import Buffer

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]

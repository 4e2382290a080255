# SPDX-License-Identifier: Apache-2.0
"""A small GGUF writer (version 3, little-endian), pure Python.

Enough to export an engine's MoE model in the tensor naming foresightd
reads (daemon/gguf/fsg_moe.h): blk.N.ffn_{gate,up,down}_exps.weight stacked
over experts (the last ggml dimension, i.e. the FIRST dimension of the
row-major shape given here, is the expert), blk.N.ffn_gate_inp.weight for the
router, <arch>.expert_count / <arch>.expert_used_count in the metadata.

    w = GGUFWriter("m.gguf")
    w.add_str("general.architecture", "qwen3moe")
    w.add_u32("qwen3moe.expert_count", 32)
    w.add_tensor("blk.0.ffn_gate_exps.weight", (32, 256, 512), BF16, data)
    w.write()

Shapes are row-major (torch/numpy order); the file stores ggml's reversed
order (ne[0] = the last, fastest dimension).  `data` is anything with the
buffer protocol (bytes, bytearray, memoryview, a contiguous numpy array) or
a zero-argument callable returning one, called while the file is written
(so a large model need not be in memory twice).  numpy is not needed.
"""

import struct

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# ggml types: id -> (name, block elements, block bytes)
F32, F16, Q4_0, Q8_0, I8, I16, I32, BF16 = 0, 1, 2, 8, 24, 25, 26, 30
TYPES = {
    F32: ("F32", 1, 4),
    F16: ("F16", 1, 2),
    Q4_0: ("Q4_0", 32, 18),
    Q8_0: ("Q8_0", 32, 34),
    I8: ("I8", 1, 1),
    I16: ("I16", 1, 2),
    I32: ("I32", 1, 4),
    BF16: ("BF16", 1, 2),
}
TYPE_BY_NAME = {v[0]: k for k, v in TYPES.items()}

# metadata value types
V_U8, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STR, V_ARR, V_U64, V_I64, V_F64 = range(13)
_SCALAR = {V_U8: "<B", V_I8: "<b", V_U16: "<H", V_I16: "<h", V_U32: "<I", V_I32: "<i", V_F32: "<f",
           V_BOOL: "<?", V_U64: "<Q", V_I64: "<q", V_F64: "<d"}


class GGUFError(ValueError):
    pass


def _str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def tensor_bytes(ggml_type, shape):
    """Bytes of a tensor of row-major `shape`."""
    if ggml_type not in TYPES:
        raise GGUFError("unknown ggml type %r" % (ggml_type,))
    name, blk, size = TYPES[ggml_type]
    if not shape:
        raise GGUFError("a tensor needs at least one dimension")
    row = shape[-1]
    if row % blk:
        raise GGUFError("%s rows must be whole blocks of %d elements, not %d" % (name, blk, row))
    n = row // blk * size
    for d in shape[:-1]:
        n *= d
    return n


class GGUFWriter:
    def __init__(self, path, alignment=DEFAULT_ALIGNMENT, version=GGUF_VERSION):
        if alignment <= 0 or alignment & (alignment - 1):
            raise GGUFError("alignment must be a power of two")
        if version not in (2, 3):
            raise GGUFError("version must be 2 or 3")
        self.path = path
        self.alignment = alignment
        self.version = version
        self._kv = []  # encoded pairs
        self._keys = set()
        self._tensors = []  # (name, ne, type, bytes, rel_off, data)
        self._names = set()
        self._data_bytes = 0
        if alignment != DEFAULT_ALIGNMENT:
            self.add_u32("general.alignment", alignment)

    # ---- metadata ---------------------------------------------------------

    def _key(self, key, vtype, payload):
        if key in self._keys:
            raise GGUFError("duplicate key %r" % key)
        self._keys.add(key)
        self._kv.append(_str(key) + struct.pack("<I", vtype) + payload)

    def add(self, key, vtype, value):
        """A scalar of value type vtype (V_*)."""
        if vtype == V_STR:
            self._key(key, V_STR, _str(value))
        elif vtype in _SCALAR:
            self._key(key, vtype, struct.pack(_SCALAR[vtype], value))
        else:
            raise GGUFError("use add_array for arrays")

    def add_u32(self, key, v):
        self.add(key, V_U32, v)

    def add_i32(self, key, v):
        self.add(key, V_I32, v)

    def add_u64(self, key, v):
        self.add(key, V_U64, v)

    def add_f32(self, key, v):
        self.add(key, V_F32, v)

    def add_bool(self, key, v):
        self.add(key, V_BOOL, bool(v))

    def add_str(self, key, v):
        self.add(key, V_STR, v)

    def add_array(self, key, elem_type, values):
        """A flat array of scalars or strings."""
        values = list(values)
        head = struct.pack("<IQ", elem_type, len(values))
        if elem_type == V_STR:
            body = b"".join(_str(v) for v in values)
        elif elem_type in _SCALAR:
            body = b"".join(struct.pack(_SCALAR[elem_type], v) for v in values)
        else:
            raise GGUFError("arrays of arrays are not supported here")
        self._key(key, V_ARR, head + body)

    # ---- tensors ------------------------------------------------------------

    def add_tensor(self, name, shape, ggml_type, data):
        """A tensor of row-major `shape` and ggml type; data: bytes-like or
        a callable returning one (checked for its size when written)."""
        if name in self._names:
            raise GGUFError("duplicate tensor %r" % name)
        if len(name.encode()) >= 64:
            raise GGUFError("tensor name %r is 64 bytes or longer" % name)
        shape = tuple(int(d) for d in shape)
        if not 1 <= len(shape) <= 4:
            raise GGUFError("tensor %s: 1 to 4 dimensions, not %d" % (name, len(shape)))
        n = tensor_bytes(ggml_type, shape)
        if not callable(data):
            got = memoryview(data).nbytes
            if got != n:
                raise GGUFError("tensor %s: %d bytes given, %s%r needs %d" % (name, got, TYPES[ggml_type][0],
                                                                              shape, n))
        off = -(-self._data_bytes // self.alignment) * self.alignment
        self._tensors.append((name, tuple(reversed(shape)), ggml_type, n, off, data))
        self._names.add(name)
        self._data_bytes = off + n
        return off

    def tensors(self):
        """[(name, ne (ggml order), type, bytes, offset in the data section)]"""
        return [t[:5] for t in self._tensors]

    # ---- output -------------------------------------------------------------

    def header_bytes(self):
        h = [GGUF_MAGIC, struct.pack("<IQQ", self.version, len(self._tensors), len(self._kv))]
        h.extend(self._kv)
        for name, ne, ty, _, off, _ in self._tensors:
            h.append(_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne) +
                     struct.pack("<IQ", ty, off))
        return b"".join(h)

    def write(self):
        """Write the file; returns the absolute offset of the data section."""
        head = self.header_bytes()
        data_start = -(-len(head) // self.alignment) * self.alignment
        with open(self.path, "wb") as f:
            f.write(head)
            f.write(b"\0" * (data_start - len(head)))
            at = 0
            for name, ne, ty, n, off, data in self._tensors:
                f.write(b"\0" * (off - at))
                buf = data() if callable(data) else data
                mv = memoryview(buf)
                if not mv.c_contiguous:
                    raise GGUFError("tensor %s: data is not C-contiguous" % name)
                mv = mv.cast("B")
                if mv.nbytes != n:
                    raise GGUFError("tensor %s: %d bytes given, %d needed" % (name, mv.nbytes, n))
                f.write(mv)
                at = off + n
        return data_start

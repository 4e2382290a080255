# SPDX-License-Identifier: Apache-2.0
"""Zero-copy export of foresight memory through DLPack, in pure ctypes.

`Buffer(ptr, nbytes, ...)` has `__dlpack__` and `__dlpack_device__`, so
`torch.from_dlpack(buf)`, `numpy.from_dlpack(buf)` (and cupy, jax, ...)
wrap the memory without copying it: an arena blob or a host-backend slot
(kDLCPU), or a CUDA-backend slot (kDLCUDA, on the device the client
library opened the card's pool on).

The capsule is the classic one (name "dltensor", a DLManagedTensor), which
every consumer accepts.  Its deleter keeps `owner` (the Client, for arena
memory) alive until the consumer frees the tensor.  The memory is
read-only by contract: the arena and host pools are mapped PROT_READ (a
write faults), and a CUDA slot belongs to the daemon.
"""

import ctypes
import threading

KDLCPU = 1
KDLCUDA = 2

# name -> (DLDataTypeCode, bits, itemsize)
DTYPES = {
    "int8": (0, 8, 1),
    "int16": (0, 16, 2),
    "int32": (0, 32, 4),
    "int64": (0, 64, 8),
    "uint8": (1, 8, 1),
    "uint16": (1, 16, 2),
    "uint32": (1, 32, 4),
    "uint64": (1, 64, 8),
    "float16": (2, 16, 2),
    "float32": (2, 32, 4),
    "float64": (2, 64, 8),
    "bfloat16": (4, 16, 2),
}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER),
]

_CAPSULE_NAME = b"dltensor"  # must outlive every capsule: a module constant
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Every DLManagedTensor handed out and not yet deleted: address ->
# (struct, shape array, on_free callback or None, owner).  The struct's
# memory lives here, so it stays valid until its deleter runs.
_live = {}
_lock = threading.Lock()


def _delete(addr):
    with _lock:
        ent = _live.pop(addr, None)
    if ent is not None and ent[2] is not None:
        ent[2]()


@_DELETER
def _deleter(mt):
    try:
        _delete(ctypes.cast(mt, ctypes.c_void_p).value)
    except Exception:  # never raise into a foreign caller (interpreter teardown)
        pass


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # A capsule still named "dltensor" was never consumed: free its tensor.
    # A consumer renames it ("used_dltensor") and calls the deleter itself.
    try:
        if _api.PyCapsule_IsValid(capsule, _CAPSULE_NAME):
            _delete(_api.PyCapsule_GetPointer(capsule, _CAPSULE_NAME))
    except Exception:
        pass


def live_exports():
    """How many exported tensors are not yet freed by their consumers."""
    with _lock:
        return len(_live)


def make_capsule(ptr, dtype, shape, device, owner=None, on_free=None):
    """A "dltensor" capsule over `ptr` (C-contiguous `shape` of `dtype`)."""
    code, bits, _ = DTYPES[dtype]
    nd = len(shape)
    shp = (ctypes.c_int64 * max(nd, 1))(*shape)
    mt = DLManagedTensor()
    mt.dl_tensor.data = ptr
    mt.dl_tensor.device = DLDevice(device[0], device[1])
    mt.dl_tensor.ndim = nd
    mt.dl_tensor.dtype = DLDataType(code, bits, 1)
    mt.dl_tensor.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    mt.dl_tensor.strides = None  # compact, row-major
    mt.dl_tensor.byte_offset = 0
    mt.manager_ctx = None
    mt.deleter = _deleter
    addr = ctypes.addressof(mt)
    with _lock:
        _live[addr] = (mt, shp, on_free, owner)
    try:
        return _api.PyCapsule_New(addr, _CAPSULE_NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))
    except BaseException:
        _delete(addr)
        raise


class Buffer:
    """A DLPack-exportable view of `nbytes` at `ptr` (an int address).

    dtype: one of DTYPES; shape: a tuple (default: the whole buffer, 1-D);
    device: (KDLCPU, 0) or (KDLCUDA, device id); owner: kept alive while any
    consumer's tensor uses the memory; on_export/on_free: called when a
    capsule is made and when its tensor is freed (the Client counts its
    exports with them)."""

    __slots__ = ("ptr", "nbytes", "dtype", "shape", "device", "owner", "_on_export", "_on_free", "__weakref__")

    def __init__(self, ptr, nbytes, dtype="uint8", shape=None, device=(KDLCPU, 0), owner=None,
                 on_export=None, on_free=None):
        if dtype not in DTYPES:
            raise ValueError("dtype must be one of %s, not %r" % (", ".join(sorted(DTYPES)), dtype))
        if not ptr:
            raise ValueError("a NULL pointer cannot be exported")
        size = DTYPES[dtype][2]
        if shape is None:
            if nbytes % size:
                raise ValueError("%d bytes are not a whole number of %s" % (nbytes, dtype))
            shape = (nbytes // size,)
        shape = tuple(int(s) for s in shape)
        need = size
        for s in shape:
            if s < 0:
                raise ValueError("negative dimension in %r" % (shape,))
            need *= s
        if need > nbytes:
            raise ValueError("shape %r of %s needs %d bytes, the buffer has %d" % (shape, dtype, need, nbytes))
        self.ptr = int(ptr)
        self.nbytes = int(nbytes)
        self.dtype = dtype
        self.shape = shape
        self.device = (int(device[0]), int(device[1]))
        self.owner = owner
        self._on_export = on_export
        self._on_free = on_free

    def __repr__(self):
        kind = "cpu" if self.device[0] == KDLCPU else "cuda:%d" % self.device[1]
        return "<foresight.dlpack.Buffer 0x%x %s %s %r>" % (self.ptr, kind, self.dtype, self.shape)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # stream: nothing of ours is in flight on any stream (a slot's bytes
        # have landed before lookup answers), so there is nothing to order.
        if copy:
            raise BufferError("foresight memory is exported without copying (copy=True refused)")
        if dl_device is not None and tuple(dl_device) != self.device:
            raise BufferError("the memory is on device %r, not %r" % (self.device, tuple(dl_device)))
        if self._on_export is not None:
            self._on_export()
        return make_capsule(self.ptr, self.dtype, self.shape, self.device, owner=self.owner, on_free=self._on_free)

    def view(self, dtype=None, shape=None, offset=0):
        """A sub-buffer `offset` bytes in, of `dtype` and `shape`."""
        if offset < 0 or offset > self.nbytes:
            raise ValueError("offset %d outside a buffer of %d bytes" % (offset, self.nbytes))
        return Buffer(self.ptr + offset, self.nbytes - offset, dtype or self.dtype, shape, self.device, self.owner,
                      self._on_export, self._on_free)


def capsule_info(capsule):
    """Read an unconsumed "dltensor" capsule without taking it (tests and
    debugging): dict of data, device, ndim, dtype (code, bits, lanes), shape."""
    if not _api.PyCapsule_IsValid(id(capsule), _CAPSULE_NAME):
        raise ValueError("not an unconsumed dltensor capsule")
    mt = DLManagedTensor.from_address(_api.PyCapsule_GetPointer(id(capsule), _CAPSULE_NAME))
    t = mt.dl_tensor
    return {
        "data": t.data,
        "device": (t.device.device_type, t.device.device_id),
        "ndim": t.ndim,
        "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        "shape": tuple(t.shape[i] for i in range(t.ndim)),
        "strides": None if not t.strides else tuple(t.strides[i] for i in range(t.ndim)),
        "byte_offset": t.byte_offset,
    }

# SPDX-License-Identifier: Apache-2.0
"""The Python face of libforesight-client: Client, View, Slot, Blob."""

import ctypes
import errno as _errno
import gc
import json
import threading
import weakref
from collections import namedtuple

from . import _lib
from . import dlpack as _dl

ANY_CARD = 0xFFFF
HORIZON_MAX = 15

SOURCE_ROUTER_AHEAD = 0
SOURCE_HOST = 1
SOURCE_KERNEL = 2

ROLE_GATE, ROLE_UP, ROLE_DOWN, ROLE_GATE_UP = 1, 2, 3, 4
WHAT_WEIGHT, WHAT_BIAS, WHAT_SCALE = 0, 1, 2
ROLE_NAMES = {ROLE_GATE: "gate", ROLE_UP: "up", ROLE_DOWN: "down", ROLE_GATE_UP: "gate_up"}
WHAT_NAMES = {WHAT_WEIGHT: "weight", WHAT_BIAS: "bias", WHAT_SCALE: "scale"}

# ggml types whose elements DLPack can describe (the arena keeps the
# model's type; quantized blocks stay bytes).
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
GGML_DTYPES = {GGML_F32: "float32", GGML_F16: "float16", GGML_BF16: "bfloat16"}


class Error(Exception):
    """A failure of libforesight-client: `errno` (positive) and the
    library's message."""

    def __init__(self, err, message):
        self.errno = abs(int(err)) if err else 0
        self.message = message
        super().__init__(message)


class ConnectError(Error):
    """fs_client_open failed: no daemon at the socket, refused, version skew."""


class InvalidArgument(Error, ValueError):
    """A layer, expert, card, horizon or score out of range."""


class Busy(Error):
    """Every epoch hold is taken (at most 8 views per client)."""


class Closed(Error):
    """The client was closed."""


class LibraryNotFound(Error, OSError):
    """libforesight-client.so could not be loaded."""


_lib_state = {"lib": None, "path": None}
_lib_lock = threading.Lock()


def library(path=None):
    """The loaded libforesight-client (loads it on first use)."""
    with _lib_lock:
        if _lib_state["lib"] is None or path:
            try:
                _lib_state["lib"], _lib_state["path"] = _lib.load(path)
            except OSError as e:
                raise LibraryNotFound(_errno.ENOENT, str(e)) from None
        return _lib_state["lib"]


def library_path():
    library()
    return _lib_state["path"]


def strerror(err):
    """The library's name for a (negative) error code."""
    s = library().fs_strerror(-abs(int(err)))
    return s.decode("utf-8", "replace") if s else "error %d" % err


def checksum(data):
    """FNV-1a 64 of a bytes-like object (the arena's checksum)."""
    mv = memoryview(data).cast("B")
    n = mv.nbytes
    if n == 0:
        return library().fs_checksum(None, 0)
    if mv.readonly:
        buf = (ctypes.c_char * n).from_buffer_copy(mv)
    else:
        buf = (ctypes.c_char * n).from_buffer(mv)
    return library().fs_checksum(ctypes.addressof(buf), n)


def _err_class(rc):
    e = -rc
    if e in (_errno.EINVAL, _errno.ERANGE):
        return InvalidArgument
    if e == _errno.EBUSY:
        return Busy
    return Error


ModelInfo = namedtuple("ModelInfo", "layers experts experts_used cards max_expert_bytes name")
# down: the card was down when the handle attached (Client.card_down asks now)
CardInfo = namedtuple("CardInfo", "id slots slot_bytes is_cuda name device down kind")
CARD_HOST, CARD_CUDA = 0, 1  # fs_card_info.kind (FS_CARD_HOST, FS_CARD_CUDA)


class Part(namedtuple("Part", "role what ggml_type offset bytes ne")):
    """One part of an expert's blob: role (ROLE_*), what (WHAT_*), ggml
    type, offset and size in the blob, ne = (elements per row, rows)."""

    __slots__ = ()

    @property
    def name(self):
        return "%s.%s" % (ROLE_NAMES.get(self.role, "?"), WHAT_NAMES.get(self.what, "?"))

    @property
    def dtype(self):
        """The DLPack dtype of its elements, or None (a quantized type)."""
        return GGML_DTYPES.get(self.ggml_type)

    @property
    def shape(self):
        """(rows, elements per row): the C-order shape of the slice."""
        return (self.ne[1], self.ne[0])


def _readonly_view(ptr, n, keep):
    arr = (ctypes.c_ubyte * n).from_address(ptr)
    arr._foresight_owner = keep
    return arr, memoryview(arr).cast("B").toreadonly()


class Blob:
    """An expert's bytes in the arena (the CPU path): valid while the Blob
    or an export of it is alive, until the Client is closed (closing waits
    for every export to be freed).  A Blob pins the arena (fs_arena_pin):
    after a daemon restart without the fd store the old arena stays mapped
    until the last Blob of it (or of a later arena before the restart) is
    freed."""

    __slots__ = ("client", "layer", "expert", "ptr", "nbytes", "checksum", "__weakref__")

    def __init__(self, client, layer, expert, ptr, nbytes, csum, pin):
        self.client = client
        self.layer = layer
        self.expert = expert
        self.ptr = ptr
        self.nbytes = nbytes
        self.checksum = csum
        weakref.finalize(self, client._arena_unpin, pin)

    def __repr__(self):
        return "<foresight.Blob layer %d expert %d: %d bytes at 0x%x>" % (self.layer, self.expert, self.nbytes,
                                                                        self.ptr or 0)

    def memoryview(self):
        """A read-only memoryview of the bytes (no copy)."""
        if not self.nbytes:
            return memoryview(b"")
        return self.client._export_view(self.ptr, self.nbytes, keep=self)

    def tobytes(self):
        return bytes(self.memoryview())

    def dlpack(self, dtype="uint8", shape=None, offset=0):
        """A DLPack Buffer (kDLCPU) over the blob, or a part of it."""
        return self.client._export_buffer(self.ptr, self.nbytes, dtype, shape, offset, (_dl.KDLCPU, 0),
                                          keep=self)

    def parts(self):
        return self.client.arena_parts(self.layer, self.expert)


class Slot:
    """Where an expert sits on a card, as seen through a held View.  Its
    bytes stay put while the view is held, and only then."""

    __slots__ = ("view", "card", "slot", "gen", "host", "device", "nbytes", "device_id", "_c")

    def __init__(self, view, sc, device_id):
        self.view = view
        self.card = sc.card
        self.slot = sc.slot
        self.gen = sc.gen
        self.host = sc.host
        self.device = sc.device
        self.nbytes = sc.bytes
        self.device_id = device_id
        self._c = sc

    def __repr__(self):
        where = "host 0x%x" % self.host if self.host else "cuda:%s 0x%x" % (self.device_id, self.device or 0)
        return "<foresight.Slot card %d slot %d gen %d: %d bytes, %s>" % (self.card, self.slot, self.gen,
                                                                        self.nbytes, where)

    @property
    def is_cuda(self):
        return not self.host and bool(self.device)

    def ready(self):
        """Whether the slot still carries this generation."""
        return bool(self.view.client._lib.fs_slot_ready(self.view.client._h(), ctypes.byref(self._c)))

    def issued_ns(self):
        return self.view.client._lib.fs_slot_issued_ns(self.view.client._h(), ctypes.byref(self._c))

    def memoryview(self):
        """A read-only memoryview of a host-backend slot's bytes."""
        if not self.host:
            raise Error(_errno.ENODEV, "a CUDA slot has no host bytes: use dlpack()")
        self.view._check_held()
        return self.view.client._export_view(self.host, self.nbytes)

    def dlpack(self, dtype="uint8", shape=None, offset=0):
        """A DLPack Buffer over the slot: kDLCPU (host backend) or kDLCUDA
        (the device pointer, valid in this process).  Use it while the view
        is held; a GPU engine synchronizes its work on it before release."""
        self.view._check_held()
        if self.host:
            return self.view.client._export_buffer(self.host, self.nbytes, dtype, shape, offset, (_dl.KDLCPU, 0))
        if self.device_id is None or self.device_id < 0:
            raise Error(_errno.ENODEV, "card %d: no CUDA device known for its pool" % self.card)
        return self.view.client._export_buffer(self.device, self.nbytes, dtype, shape, offset,
                                               (_dl.KDLCUDA, self.device_id))


class View:
    """A held residency epoch (fs_acquire).  Release it (or leave the
    with-block) after the window; the daemon keeps every slot it maps."""

    __slots__ = ("client", "_v", "_held", "__weakref__")

    def __init__(self, client):
        self.client = client
        self._v = _lib.ViewC()
        self._held = False

    @property
    def epoch(self):
        """0 when the daemon is gone: every lookup misses."""
        return self._v.epoch

    @property
    def held(self):
        return self._held

    def _check_held(self):
        if not self._held:
            raise Error(_errno.EINVAL, "the view was released")

    def _lookup(self, fn, card, layer, expert):
        c = self.client
        self._check_held()
        c._check_le(layer, expert, card)
        sc = _lib.SlotC()
        if not fn(c._h(), ctypes.byref(self._v), card, layer, expert, ctypes.byref(sc)):
            return None
        return Slot(self, sc, c._card_device(sc.card) if sc.device else None)

    def lookup(self, card, layer, expert):
        """The Slot holding (layer, expert) on `card` in this epoch, or None
        (compute it from the arena)."""
        return self._lookup(self.client._lib.fs_lookup, card, layer, expert)

    def lookup_live(self, card, layer, expert):
        """Like lookup, also finding copies that landed since the acquire."""
        return self._lookup(self.client._lib.fs_lookup_live, card, layer, expert)

    def release(self):
        """Idempotent."""
        if self._held:
            self._held = False
            c = self.client
            c._views.discard(self)
            if c._handle:
                c._lib.fs_release(c._handle, ctypes.byref(self._v))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __repr__(self):
        return "<foresight.View epoch %d%s>" % (self._v.epoch, "" if self._held else " (released)")


class Client:
    """A handle on foresightd: attach on construction, detach on close().

    socket: the control socket (None: $FORESIGHT_SOCKET, then the default);
    name: shown by `fsctl clients`; model: must match the served model;
    ring_entries: 0 for the daemon default; reattach: re-attach by itself
    after a daemon restart; lib: path of libforesight-client.so.
    """

    def __init__(self, socket=None, name=None, model=None, ring_entries=0, reattach=True, lib=None):
        self._lib = library(lib)
        self._handle = None
        self._closing = False
        self._exports = 0
        self._elock = threading.Lock()
        self._views = weakref.WeakSet()
        self._dev = {}
        enc = (lambda s: None if s is None else str(s).encode())
        self._opts = _lib.ClientOpts(enc(socket), enc(name or "python"), enc(model), int(ring_entries),
                                     0 if reattach else 1)
        h = ctypes.c_void_p()
        rc = self._lib.fs_client_open(ctypes.byref(h), ctypes.byref(self._opts))
        if rc < 0:
            msg = (self._lib.fs_open_error() or b"").decode("utf-8", "replace")
            raise ConnectError(rc, "%s (%s)" % (msg, strerror(rc)) if msg else strerror(rc))
        self._handle = h.value
        mi = _lib.ModelInfoC()
        self._check(self._lib.fs_client_model(self._handle, ctypes.byref(mi)), "model")
        self.model = ModelInfo(mi.layers, mi.experts, mi.experts_used, mi.cards, mi.max_expert_bytes,
                               mi.model.decode("utf-8", "replace"))
        self.cards = self._read_cards()

    # ---- plumbing -----------------------------------------------------

    def _h(self):
        if self._handle is None or self._closing:
            raise Closed(_errno.EBADF, "the client is closed")
        return self._handle

    def _message(self, rc, what):
        msg = ""
        if self._handle:
            raw = self._lib.fs_client_last_error(self._handle)
            msg = raw.decode("utf-8", "replace") if raw else ""
        base = "%s: %s" % (what, strerror(rc))
        return "%s (%s)" % (base, msg) if msg else base

    def _check(self, rc, what):
        if rc < 0:
            raise _err_class(rc)(rc, self._message(rc, what))
        return rc

    def _check_le(self, layer, expert, card=None):
        m = self.model
        if not 0 <= layer < m.layers:
            raise InvalidArgument(_errno.EINVAL, "layer %d out of range (the model has %d)" % (layer, m.layers))
        if not 0 <= expert < m.experts:
            raise InvalidArgument(_errno.EINVAL, "expert %d out of range (the model has %d)" % (expert, m.experts))
        if card is not None and card != ANY_CARD and not 0 <= card < m.cards:
            raise InvalidArgument(_errno.EINVAL, "card %d out of range (the daemon has %d)" % (card, m.cards))

    def _read_cards(self):
        out = []
        for i in range(self.model.cards):
            ci = _lib.CardInfoC()
            if self._lib.fs_client_card(self._handle, i, ctypes.byref(ci)) < 0:
                break
            dev = self._lib.fs_card_device(self._handle, i) if ci.kind == CARD_CUDA else -_errno.ENODEV
            if dev >= 0:
                self._dev[i] = dev
            out.append(CardInfo(ci.id, ci.slots, ci.slot_bytes, ci.kind == CARD_CUDA,
                                ci.name.decode("utf-8", "replace"), dev if dev >= 0 else None, bool(ci.down),
                                ci.kind))
        return out

    def card_down(self, card):
        """True once the card is down (lost, reset or taken down with
        `fsctl card down`): lookups of it answer "not resident" from then on,
        until foresightd restarts.  Read live from the daemon's region."""
        self._check_le(0, 0, card)
        ci = _lib.CardInfoC()
        self._check(self._lib.fs_client_card(self._h(), card, ctypes.byref(ci)), "fs_client_card")
        return bool(ci.down)

    def _card_device(self, card):
        d = self._dev.get(card)
        if d is None:
            d = self._lib.fs_card_device(self._h(), card)
            if d < 0:
                return None
            self._dev[card] = d
        return d

    def _export_started(self):
        with self._elock:
            self._exports += 1

    def _export_done(self):
        with self._elock:
            self._exports -= 1
            last = self._closing and self._exports == 0
        if last:
            self._really_close()

    def _export_view(self, ptr, n, keep=None):
        self._h()
        self._export_started()
        arr, mv = _readonly_view(ptr, n, keep if keep is not None else self)
        weakref.finalize(arr, self._export_done)
        return mv

    def _export_buffer(self, ptr, nbytes, dtype, shape, offset, device, keep=None):
        self._h()
        if offset < 0 or offset > nbytes:
            raise InvalidArgument(_errno.EINVAL, "offset %d outside %d bytes" % (offset, nbytes))
        return _dl.Buffer(ptr + offset, nbytes - offset, dtype, shape, device,
                          owner=keep if keep is not None else self,
                          on_export=self._export_started, on_free=self._export_done)

    # ---- the handle -----------------------------------------------------

    @property
    def closed(self):
        return self._handle is None or self._closing

    def close(self):
        """Detach and free the handle.  Idempotent.  Views still held are
        released.  While tensors or memoryviews exported from the arena are
        alive, the detach waits until the last one is freed."""
        if self._handle is None or self._closing:
            return
        for v in list(self._views):
            v.release()
        with self._elock:
            self._closing = True
            pending = self._exports
        if pending:
            gc.collect()
        with self._elock:
            pending = self._exports
        if pending == 0:
            self._really_close()

    def _really_close(self):
        with self._elock:
            h, self._handle = self._handle, None
        if h:
            self._lib.fs_client_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            if self._handle is not None and not self._closing:
                self.close()
        except Exception:
            pass

    @property
    def attached(self):
        """True while attached to a live daemon."""
        return bool(self._lib.fs_client_attached(self._h()))

    @property
    def attach_count(self):
        return self._lib.fs_client_attach_count(self._h())

    @property
    def dropped(self):
        """Posts dropped (ring full, daemon gone)."""
        return self._lib.fs_client_dropped(self._h())

    @property
    def redials(self):
        """Control dialers replaced since open (fs_client_redials)."""
        return self._lib.fs_client_redials(self._h())

    @property
    def exports(self):
        """Arena/slot exports (memoryviews, DLPack tensors) not yet freed."""
        return self._exports

    def card(self, i):
        return self.cards[i]

    # ---- posting --------------------------------------------------------

    def post_predict(self, window, layer, expert, score=1.0, horizon=1, card=ANY_CARD, source=SOURCE_ROUTER_AHEAD):
        """Predict that `expert` of `layer` will be wanted `horizon` layers
        ahead.  Returns False when the record was dropped (ring full or
        daemon gone); raises InvalidArgument on bad fields."""
        self._check_le(layer, expert, card)
        rc = self._lib.fs_post_predict(self._h(), window & 0xFFFFFFFF, layer, expert, card, float(score), horizon,
                                       source)
        return self._posted(rc, "post_predict")

    def post_usage(self, window, layer, expert, hit, card=0):
        """The layer used `expert`; hit: served from a slot."""
        self._check_le(layer, expert, card)
        rc = self._lib.fs_post_usage(self._h(), window & 0xFFFFFFFF, layer, expert, card, 1 if hit else 0)
        return self._posted(rc, "post_usage")

    def window_begin(self, window, tokens=1):
        return self._posted(self._lib.fs_window_begin(self._h(), window & 0xFFFFFFFF, tokens), "window_begin")

    def window_end(self, window):
        return self._posted(self._lib.fs_window_end(self._h(), window & 0xFFFFFFFF), "window_end")

    def window(self, window, tokens=1):
        """with client.window(w, tokens): ...  (begin, then end)."""
        return _Window(self, window, tokens)

    def _posted(self, rc, what):
        if rc == -_errno.ENOBUFS or rc == -_errno.ENOTCONN:
            return False
        self._check(rc, what)
        return True

    # ---- epochs ---------------------------------------------------------

    def acquire(self):
        """Hold the newest epoch: a View (a context manager)."""
        v = View(self)
        self._check(self._lib.fs_acquire(self._h(), ctypes.byref(v._v)), "acquire")
        v._held = True
        self._views.add(v)
        return v

    # ---- the arena --------------------------------------------------------

    def arena_expert(self, layer, expert):
        """The expert's bytes in the arena (a Blob)."""
        self._check_le(layer, expert)
        b = _lib.ExpertBlobC()
        # The pin first: the bytes fs_arena_expert answers are then in the
        # pinned arena or a later one, which the pin keeps as well.
        pin = self._lib.fs_arena_pin(self._h())
        try:
            self._check(self._lib.fs_arena_expert(self._h(), layer, expert, ctypes.byref(b)),
                        "arena_expert(%d, %d)" % (layer, expert))
        except BaseException:
            self._arena_unpin(pin)
            raise
        return Blob(self, layer, expert, b.data, b.bytes, b.checksum, pin)

    def _arena_unpin(self, pin):
        # After close the handle (and its pins) are gone: under _elock, so
        # that close (_really_close) cannot free it between check and call.
        with self._elock:
            if pin and self._handle is not None:
                self._lib.fs_arena_unpin(self._handle, pin)

    def layer_ready(self, layer):
        """True when the layer's experts are in the arena; False while the
        daemon still loads it (arena_expert raises EAGAIN for it then)."""
        self._check_le(layer, 0)
        return self._check(self._lib.fs_layer_ready(self._h(), layer), "layer_ready(%d)" % layer) == 1

    def arena_parts(self, layer, expert):
        """The parts of an expert's blob (a GGUF arena), in blob order; []
        for a synthetic arena or a dense layer."""
        self._check_le(layer, expert)
        arr = (_lib.ExpertPartC * 12)()
        n = self._check(self._lib.fs_arena_expert_parts(self._h(), layer, expert, arr, 12),
                        "arena_parts(%d, %d)" % (layer, expert))
        return [Part(p.role, p.what, p.ggml_type, p.offset, p.bytes, (p.ne[0], p.ne[1])) for p in arr[:min(n, 12)]]

    def ready_words(self, card):
        """Address of a card's ready words (uint32[slots]), or None."""
        p = self._lib.fs_card_ready_words(self._h(), card)
        return p or None

    # ---- stats --------------------------------------------------------------

    def stats(self):
        """The daemon's `stats` reply as a dict (one control round trip)."""
        size = 1 << 16
        for _ in range(4):
            buf = ctypes.create_string_buffer(size)
            n = self._check(self._lib.fs_client_stats_json(self._h(), buf, size), "stats")
            if n < size:
                return json.loads(buf.value.decode("utf-8"))
            size = n + 1
        raise Error(_errno.EAGAIN, "stats: the reply kept growing")

    def __repr__(self):
        if self.closed:
            return "<foresight.Client closed>"
        return "<foresight.Client %s: %d layers x %d experts, %d cards>" % (self.model.name, self.model.layers,
                                                                           self.model.experts, self.model.cards)


class _Window:
    __slots__ = ("c", "w", "t")

    def __init__(self, c, w, t):
        self.c, self.w, self.t = c, w, t

    def __enter__(self):
        self.c.window_begin(self.w, self.t)
        return self.w

    def __exit__(self, *exc):
        self.c.window_end(self.w)
        return False

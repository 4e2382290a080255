# SPDX-License-Identifier: Apache-2.0
"""The binding against a real foresightd on the host backend."""

import ctypes
import errno
import gc
import os
import subprocess
import sys
import time
import unittest

import foresight
from foresight import _lib
from foresight import dlpack as dl

import fsd

LAYERS, EXPERTS, USED, SLOTS, EXPERT_BYTES = 4, 8, 2, 16, 65536

try:
    import numpy
except ImportError:
    numpy = None


def find(view, layer, expert):
    """The slot of (layer, expert) on any card (the daemon may place an
    expert on another card than the one predicted), or None."""
    for card in range(view.client.model.cards):
        s = view.lookup(card, layer, expert)
        if s is not None:
            return s
    return None


def resident(c, card, layer, experts, window, timeout=10.0):
    """Predict `experts` of `layer` for `card` until a view maps them all
    (on some card); returns the held view (the caller releases it)."""
    state = {"w": window}

    def attempt():
        w = state["w"]
        state["w"] += 1
        with c.window(w, tokens=1):
            for e in experts:
                c.post_predict(w, layer, e, score=1.0, horizon=1, card=card)
        v = c.acquire()
        if all(find(v, layer, e) is not None for e in experts):
            return v
        v.release()
        return None

    return fsd.wait_for(attempt, timeout, step=0.01)


class NoDaemon(unittest.TestCase):
    def test_struct_sizes_match_the_header(self):
        for cls, size in _lib.EXPECTED_SIZES.items():
            self.assertEqual(ctypes.sizeof(cls), size, cls.__name__)

    def test_bad_socket_raises_with_the_library_message(self):
        with self.assertRaises(foresight.ConnectError) as cm:
            foresight.Client(socket="/nonexistent-dir/fs.sock", name="py-test")
        e = cm.exception
        self.assertIsInstance(e, foresight.Error)
        self.assertGreater(e.errno, 0)
        self.assertIn("/nonexistent-dir/fs.sock", str(e))
        self.assertIn("not running", str(e))

    def test_socket_path_too_long(self):
        with self.assertRaises(foresight.ConnectError) as cm:
            foresight.Client(socket="/" + "x" * 200)
        self.assertEqual(cm.exception.errno, errno.ENAMETOOLONG)
        self.assertIn("too long", str(cm.exception))

    def test_library_not_found_names_the_path(self):
        with self.assertRaises(foresight.LibraryNotFound) as cm:
            foresight.library("/nonexistent/libforesight-client.so")
        self.assertIn("/nonexistent/libforesight-client.so", str(cm.exception))
        self.assertTrue(foresight.library_path())  # the loaded one is kept

    def test_checksum_is_fnv1a64(self):
        self.assertEqual(foresight.checksum(b""), 0xCBF29CE484222325)
        h = 0xCBF29CE484222325
        for b in b"foresight":
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        self.assertEqual(foresight.checksum(b"foresight"), h)
        self.assertEqual(foresight.checksum(bytearray(b"foresight")), h)

    def test_dlpack_buffer_checks_its_shape(self):
        raw = ctypes.create_string_buffer(64)
        with self.assertRaises(ValueError):
            dl.Buffer(ctypes.addressof(raw), 64, "float32", (17,))
        with self.assertRaises(ValueError):
            dl.Buffer(ctypes.addressof(raw), 63, "float32")
        with self.assertRaises(ValueError):
            dl.Buffer(ctypes.addressof(raw), 64, "complex64")
        with self.assertRaises(ValueError):
            dl.Buffer(0, 64)
        b = dl.Buffer(ctypes.addressof(raw), 64, "float32", (4, 4), owner=raw)
        with self.assertRaises(BufferError):
            b.__dlpack__(copy=True)
        with self.assertRaises(BufferError):
            b.__dlpack__(dl_device=(dl.KDLCUDA, 0))


class WithDaemon(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = fsd.Daemon("--layers", LAYERS, "--experts", EXPERTS, "--experts-used", USED, "--slots", SLOTS,
                           "--expert-bytes", EXPERT_BYTES, "--cards", 2, "--tiers", 0).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        log = cls.d.log_text()
        cls.d.cleanup()
        if rc != 0:
            raise AssertionError("foresightd exited %s: %s" % (rc, log))

    def setUp(self):
        self.c = foresight.Client(socket=self.d.sock, name="py-test")

    def tearDown(self):
        self.c.close()

    def test_model_and_cards(self):
        m = self.c.model
        self.assertEqual((m.layers, m.experts, m.experts_used, m.cards), (LAYERS, EXPERTS, USED, 2))
        self.assertGreaterEqual(m.max_expert_bytes, EXPERT_BYTES)
        self.assertEqual(len(self.c.cards), 2)
        for i, card in enumerate(self.c.cards):
            self.assertEqual(card.id, i)
            self.assertEqual(card.slots, SLOTS)
            self.assertFalse(card.is_cuda)
            self.assertEqual(card.kind, 0)  # FS_CARD_HOST
            self.assertIsNone(card.device)
            self.assertFalse(card.down)
            self.assertFalse(self.c.card_down(i))
        self.assertTrue(self.c.attached)
        self.assertEqual(self.c.attach_count, 1)
        self.assertEqual(self.c.redials, 0, "a plain attach replaced no dialer")
        self.assertIn("py-test", repr(self.c) + self.c.model.name + "py-test")

    def test_predicted_expert_is_served_with_the_arena_bytes(self):
        c = self.c
        experts = [1, 3, 5]
        v = resident(c, 0, 2, experts, window=100)
        self.assertIsNotNone(v, "predicted experts never became resident")
        with v:
            self.assertGreater(v.epoch, 0)
            for e in experts:
                s = find(v, 2, e)
                self.assertIsNotNone(s)
                self.assertTrue(s.ready())
                self.assertIn(s.card, (0, 1))
                self.assertFalse(s.is_cuda)
                self.assertEqual(s.nbytes, EXPERT_BYTES)
                self.assertIsNotNone(v.lookup_live(s.card, 2, e))
                blob = c.arena_expert(2, e)
                self.assertEqual(blob.nbytes, EXPERT_BYTES)
                sb = s.memoryview()
                self.assertTrue(sb.readonly)
                self.assertEqual(sb, blob.memoryview())
                self.assertEqual(foresight.checksum(sb), blob.checksum)
                self.assertEqual(foresight.checksum(blob.memoryview()), blob.checksum)
                c.post_usage(100, 2, e, hit=True, card=s.card)
                del sb
            # Different experts are different bytes (the test can fail).
            self.assertNotEqual(c.arena_expert(2, 1).tobytes(), c.arena_expert(2, 3).tobytes())
            # A synthetic arena is whole from the start: every layer is in.
            self.assertTrue(c.layer_ready(2))
            self.assertIsNone(v.lookup(0, 2, 6), "never predicted, never used")
        self.assertFalse(v.held)
        with self.assertRaises(foresight.Error):
            v.lookup(0, 2, 1)

    def test_dlpack_capsule_describes_the_blob(self):
        c = self.c
        blob = c.arena_expert(1, 4)
        before = dl.live_exports()
        buf = blob.dlpack("float32", (EXPERT_BYTES // 4 // 16, 16))
        self.assertEqual(buf.__dlpack_device__(), (dl.KDLCPU, 0))
        cap = buf.__dlpack__(stream=None, max_version=(1, 0))
        info = dl.capsule_info(cap)
        self.assertEqual(info["data"], blob.ptr)
        self.assertEqual(info["device"], (1, 0))
        self.assertEqual(info["dtype"], (2, 32, 1))
        self.assertEqual(info["shape"], (EXPERT_BYTES // 64, 16))
        self.assertIsNone(info["strides"])
        self.assertEqual(c.exports, 1)
        del cap  # never consumed: the capsule's destructor frees it
        gc.collect()
        self.assertEqual(dl.live_exports(), before)
        self.assertEqual(c.exports, 0)

        # A consumer renames the capsule and later calls the deleter.
        part = blob.dlpack("uint8", (256,), offset=4096)
        cap = part.__dlpack__()
        self.assertEqual(dl.capsule_info(cap)["data"], blob.ptr + 4096)
        api = ctypes.pythonapi
        ptr = api.PyCapsule_GetPointer(id(cap), b"dltensor")
        self.assertEqual(api.PyCapsule_SetName(ctypes.py_object(cap), b"used_dltensor"), 0)
        mt = dl.DLManagedTensor.from_address(ptr)
        data = ctypes.string_at(mt.dl_tensor.data, 256)
        self.assertEqual(data, blob.tobytes()[4096:4096 + 256])
        del cap
        gc.collect()
        self.assertEqual(c.exports, 1, "consumed: alive until the consumer's deleter")
        mt.deleter(ctypes.pointer(mt))
        self.assertEqual(c.exports, 0)
        self.assertEqual(dl.live_exports(), before)

    def test_numpy_from_dlpack(self):
        if numpy is None:
            print("\nSKIP: test_numpy_from_dlpack: numpy is not installed (DLPack checked without it)",
                  file=sys.stderr)
            self.skipTest("numpy is not installed")
        c = self.c
        blob = c.arena_expert(3, 7)
        a = numpy.from_dlpack(blob.dlpack("uint8"))
        self.assertEqual(a.shape, (EXPERT_BYTES,))
        self.assertEqual(a.tobytes(), blob.tobytes())
        f = numpy.from_dlpack(blob.dlpack("float16", (EXPERT_BYTES // 2 // 32, 32)))
        self.assertEqual(f.dtype, numpy.float16)
        self.assertEqual(f.tobytes(), blob.tobytes())
        v = resident(c, 1, 3, [7], window=200)
        self.assertIsNotNone(v)
        with v:
            s = numpy.from_dlpack(find(v, 3, 7).dlpack())
            self.assertTrue(numpy.array_equal(s, a))
            del s
        del a, f
        gc.collect()
        self.assertEqual(c.exports, 0)

    def test_errors(self):
        c = self.c
        with self.assertRaises(foresight.InvalidArgument) as cm:
            c.arena_expert(LAYERS, 0)
        self.assertIn("layer %d out of range" % LAYERS, str(cm.exception))
        with self.assertRaises(foresight.InvalidArgument):
            c.arena_expert(0, EXPERTS)
        with self.assertRaises(ValueError):  # InvalidArgument is a ValueError too
            c.arena_parts(-1, 0)
        with c.acquire() as v:
            with self.assertRaises(foresight.InvalidArgument):
                v.lookup(0, 0, EXPERTS + 3)
            with self.assertRaises(foresight.InvalidArgument):
                v.lookup(2, 0, 0)
        # Fields the C library refuses: its code and message.
        with self.assertRaises(foresight.InvalidArgument) as cm:
            c.post_predict(1, 0, 0, score=1.0, horizon=0)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertIn("post_predict", str(cm.exception))
        with self.assertRaises(foresight.InvalidArgument):
            c.post_predict(1, 0, 0, score=-1.0)
        # Issue 21: a score that is not a finite number >= 0 is refused (the
        # record validator of proto/fs_rec.h, surfaced as InvalidArgument).
        for bad in (float("inf"), float("-inf"), float("nan")):
            with self.assertRaises(foresight.InvalidArgument, msg="score=%r" % bad):
                c.post_predict(1, 0, 0, score=bad)
        with self.assertRaises(foresight.InvalidArgument):
            c.post_predict(1, 0, 0, horizon=foresight.HORIZON_MAX + 1)
        self.assertEqual(c.arena_parts(0, 0), [], "a synthetic arena has no part table")

    def test_view_holds_are_bounded(self):
        c = self.c
        views = [c.acquire() for _ in range(8)]
        with self.assertRaises(foresight.Busy):
            c.acquire()
        for v in views:
            v.release()
            v.release()  # idempotent
        c.acquire().release()

    def test_stats(self):
        s = self.c.stats()
        self.assertEqual(s["model"]["layers"], LAYERS)
        self.assertEqual(s["model"]["experts"], EXPERTS)
        self.assertEqual(s["backend"], "host")
        self.assertNotIn("ok", s)
        self.assertIn("py-test", [x.get("name") for x in s["clients"]])
        self.assertIn("hit_rate", s["totals"])

    def test_close_twice_and_use_after_close(self):
        c = foresight.Client(socket=self.d.sock, name="py-close")
        v = c.acquire()
        c.close()
        self.assertFalse(v.held, "close releases views")
        c.close()
        self.assertTrue(c.closed)
        with self.assertRaises(foresight.Closed):
            c.acquire()
        with self.assertRaises(foresight.Closed):
            c.post_usage(0, 0, 0, hit=False)
        with self.assertRaises(foresight.Closed):
            c.stats()
        with self.assertRaises(foresight.Closed):
            _ = c.attached

    def test_close_waits_for_exports(self):
        c = foresight.Client(socket=self.d.sock, name="py-exports")
        blob = c.arena_expert(0, 2)
        want = bytes(blob.memoryview())
        mv = blob.memoryview()
        c.close()
        self.assertTrue(c.closed)
        self.assertIsNotNone(c._handle, "the arena stays mapped while a view of it lives")
        self.assertEqual(bytes(mv), want)
        del mv
        gc.collect()
        self.assertIsNone(c._handle, "freed with the last export")

    def test_posts_and_windows(self):
        c = self.c
        with c.window(7, tokens=3) as w:
            self.assertEqual(w, 7)
            self.assertTrue(c.post_predict(w, 1, 2, score=0.5, horizon=2))
            self.assertTrue(c.post_usage(w, 1, 2, hit=False, card=1))
        self.assertEqual(c.dropped, 0)


class DaemonRestart(unittest.TestCase):
    """kill -9 under an attached client, then a new daemon on the socket."""

    def test_carries_on_and_reattaches(self):
        d = fsd.Daemon("--layers", 2, "--experts", 4, "--experts-used", 2, "--slots", 8, "--cards", 1,
                       "--expert-bytes", 16384, "--tiers", 0).start()
        try:
            c = foresight.Client(socket=d.sock, name="py-restart")
            want = c.arena_expert(1, 3).tobytes()
            # A Blob and a memoryview of it kept across the restart: the
            # new daemon builds a new arena (no fd store here); the Blob's
            # pin keeps the old one mapped while they live.
            kept = c.arena_expert(1, 3)
            kept_mv = kept.memoryview()
            v = resident(c, 0, 1, [3], window=1)
            self.assertIsNotNone(v)
            v.release()
            d.kill()
            self.assertTrue(fsd.wait_for(lambda: not c.attached, 10), "the client never saw the daemon die")

            def empty_view():
                with c.acquire() as v:
                    return v.epoch == 0 and find(v, 1, 3) is None

            # The background thread retires the attachment within ~100 ms.
            self.assertTrue(fsd.wait_for(empty_view, 5), "views after the daemon died should miss")
            self.assertFalse(c.post_usage(5, 1, 3, hit=False, card=0), "dropped, not raised")
            self.assertGreater(c.dropped, 0)
            self.assertEqual(c.arena_expert(1, 3).tobytes(), want, "the arena stays readable")
            with self.assertRaises(foresight.Error):
                c.stats()
            d.start()
            self.assertTrue(fsd.wait_for(lambda: c.attached, 15), "no re-attach: " + d.log_text())
            self.assertEqual(c.attach_count, 2)
            v = resident(c, 0, 1, [3], window=50)
            self.assertIsNotNone(v)
            with v:
                self.assertEqual(find(v, 1, 3).memoryview(), c.arena_expert(1, 3).memoryview())

            def arena_maps():
                with open("/proc/self/maps") as f:
                    return sum("/memfd:foresight-arena" in line for line in f)

            def churn():  # quiescent points for the library's background thread
                for _ in range(3):
                    with c.acquire():
                        pass
                time.sleep(0.05)

            for _ in range(6):
                churn()
            self.assertEqual(arena_maps(), 2, "the pinned old arena and the new one")
            self.assertEqual(bytes(kept_mv), want, "a Blob kept across the restart still reads its bytes")
            self.assertEqual(kept.tobytes(), want)
            del kept, kept_mv
            gc.collect()
            self.assertTrue(fsd.wait_for(lambda: churn() or arena_maps() == 1, 10),
                            "the old arena stayed mapped after its last Blob went")
            c.close()
        finally:
            d.cleanup()


class CardDown(unittest.TestCase):
    """`fsctl card down 1` under an attached client: the card reads as down
    and nothing is found on it any more; the other card keeps serving."""

    def test_a_card_taken_down_is_seen_and_never_looked_up(self):
        d = fsd.Daemon("--layers", 2, "--experts", 8, "--experts-used", 2, "--slots", 8, "--cards", 2,
                       "--expert-bytes", 16384, "--tiers", 0).start()
        try:
            c = foresight.Client(socket=d.sock, name="py-card-down")
            v = resident(c, 1, 1, [2, 5], window=1)
            self.assertIsNotNone(v, "no expert became resident")
            v.release()
            self.assertFalse(c.card_down(1))
            r = subprocess.run([fsd.fsctl(), "--socket", d.sock, "card", "down", "1"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(c.card_down(1))
            self.assertFalse(c.card_down(0))
            with c.acquire() as v:
                for e in range(8):
                    self.assertIsNone(v.lookup(1, 1, e), "card 1 is down")
            v = resident(c, 0, 0, [4], window=100)
            self.assertIsNotNone(v, "card 0 stopped serving")
            with v:
                self.assertEqual(find(v, 0, 4).memoryview(), c.arena_expert(0, 4).memoryview())
            with self.assertRaises(foresight.InvalidArgument):
                c.card_down(7)
            c.close()
        finally:
            d.cleanup()


if __name__ == "__main__":
    unittest.main()

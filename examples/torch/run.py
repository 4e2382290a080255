#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A transformers Qwen3-MoE model served by foresightd, against the stock
model: greedy decode, identical token ids asserted, tokens/s and hit rates.

    python3 examples/torch/run.py --foresightd build/daemon/foresightd --backend cuda --out DIR

1. builds a Qwen3-MoE model with seeded random weights (export_gguf.Spec:
   8 layers, hidden 512, 32 experts, top-4, moe_intermediate 256, bf16;
   nothing downloaded) and exports it to DIR/model.gguf;
2. decodes --tokens tokens greedily with the stock model (every expert on
   the GPU, transformers' eager expert loop): the reference tokens, logits
   and tokens/s;
3. wraps the model's MoE blocks (served.Engine), frees their GPU experts,
   and for each slot budget in --budgets starts foresightd --model
   DIR/model.gguf --slots N and decodes the same prompt twice (pass 1 cold,
   pass 2 with the tier warm), one window and one held epoch per step;
4. "two-engines": a second engine process (this script, --child) decodes
   against the same daemon at the same time;
5. "restart": the daemon is killed (SIGKILL) a third into a pass and a new
   one started two thirds in; the engine carries on through the CPU path
   and re-attaches;
6. "cpu-path": misses computed on the CPU (other kernels: tokens only);
7. prints the table, writes DIR/results.md and DIR/results.json, exits 1 if
   any served run's tokens differ from the stock model's.
"""

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

import report  # noqa: E402
from export_gguf import Spec  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--foresightd", default=os.path.join(ROOT, "build", "daemon", "foresightd"))
    p.add_argument("--fsctl", default=None, help="default: tools/fsctl/fsctl beside the daemon's build")
    p.add_argument("--backend", default="cuda", choices=["cuda", "host"])
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/fs-torch"))
    p.add_argument("--tokens", type=int, default=64, help="decode steps after the prompt")
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budgets", default="16,32,64,128,320", help="slots per card, comma separated")
    p.add_argument("--modes", default="budgets,two-engines,restart,cpu-path",
                   help="cpu-path rows are reported, not judged (CPU kernels sum differently)")
    p.add_argument("--ahead", type=int, default=2, help="router-ahead: layers predicted ahead")
    p.add_argument("--ahead-extra", type=int, default=2, help="predict top_k + this many per layer")
    p.add_argument("--live", action="store_true", help="fs_lookup_live instead of fs_lookup")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--experts", type=int, default=32)
    p.add_argument("--top-k", type=int, default=4)
    p.add_argument("--moe-ff", type=int, default=256)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--daemon-args", default="", help="extra foresightd arguments")
    # the second engine of "two-engines"
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--socket", help=argparse.SUPPRESS)
    p.add_argument("--gguf", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--ready", help=argparse.SUPPRESS)
    p.add_argument("--go", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def spec_of(a):
    return Spec(layers=a.layers, hidden=a.hidden, experts=a.experts, top_k=a.top_k, moe_ff=a.moe_ff, vocab=a.vocab,
                dtype=a.dtype)


def log(*x):
    print("[run.py %s]" % time.strftime("%H:%M:%S"), *x, flush=True)


# ---- the daemon ---------------------------------------------------------------


class Daemon:
    def __init__(self, a, gguf, slots, sock, logpath):
        self.a, self.gguf, self.slots, self.sock, self.log = a, gguf, slots, sock, logpath
        self.proc = None
        self.fsctl = a.fsctl or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.foresightd))),
                                             "tools", "fsctl", "fsctl")

    def start(self, timeout=120.0):
        with open(self.log, "ab") as lf:
            cmd = [self.a.foresightd, "--backend", self.a.backend, "--socket", self.sock, "--model", self.gguf,
                   "--allow-unlocked", "--slots", str(self.slots)] + self.a.daemon_args.split()
            lf.write(("\n== %s\n" % " ".join(cmd)).encode())
            lf.flush()
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=lf)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("foresightd exited %s: %s" % (self.proc.returncode, self.tail()))
            if subprocess.run([self.fsctl, "--socket", self.sock, "ping"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("foresightd did not answer within %.0f s: %s" % (timeout, self.tail()))

    def tail(self, n=1500):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(pred, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


# ---- decoding -------------------------------------------------------------------


def greedy(model, prompt, n, engine=None, before_step=None):
    """Prompt (prefill, step 0) then n greedy decode steps.  Returns
    (tokens, per-step last logits (float32, CPU), decode seconds)."""
    import torch

    toks, logits = [], []
    past, ids, t_dec = None, prompt, 0.0
    with torch.no_grad():
        for i in range(n + 1):
            if before_step:
                before_step(i)
            if prompt.is_cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            with (engine.step(ids.shape[1]) if engine else contextlib.nullcontext()):
                out = model(input_ids=ids, past_key_values=past, use_cache=True)
                last = out.logits[:, -1, :].float()
                nxt = last.argmax(-1)
                toks.append(int(nxt.item()))
            if i:
                t_dec += time.perf_counter() - t0
            logits.append(last.cpu())
            past = out.past_key_values
            ids = nxt.view(1, 1)
    return toks, torch.cat(logits), t_dec


def compare(ref, got, label):
    """Row fields from a served run against the stock reference."""
    import torch

    toks, logits, t = got
    diff = report.first_difference(ref["tokens"], toks)
    same_bits = bool(torch.equal(ref["logits"], logits))
    maxdiff = float((ref["logits"] - logits).abs().max()) if logits.shape == ref["logits"].shape else None
    tok_s = (len(toks) - 1) / t if t > 0 else None
    row = {"tokens": diff is None, "bits": same_bits, "tok_s": tok_s,
           "vs_stock": tok_s / ref["tok_s"] if tok_s and ref["tok_s"] else None,
           "max_logit_diff": maxdiff, "first_diff": diff}
    if diff is not None:
        log("%s: TOKENS DIFFER from step %d: stock %s, served %s" % (label, diff, ref["tokens"][diff:diff + 8],
                                                                  toks[diff:diff + 8]))
    return row


def make_prompt(a, device):
    import torch

    g = torch.Generator().manual_seed(a.seed + 1)
    return torch.randint(0, a.vocab, (1, a.prompt_len), generator=g).to(device)


def build_all(a, gguf_path, export=True):
    """The model, its spec, the stock reference, the served engine (installed,
    GPU experts freed)."""
    import torch

    import export_gguf
    import qwen_moe
    import served

    spec = spec_of(a)
    if a.device.startswith("cuda"):
        torch.cuda.set_device(torch.device(a.device))
        torch.backends.cuda.matmul.allow_tf32 = False
    model = qwen_moe.build(spec, seed=a.seed, device=a.device)
    impl = qwen_moe.force_eager_experts(model)
    if export:
        t0 = time.perf_counter()
        export_gguf.export(model, spec, gguf_path)
        log("exported %s (%.1f MiB) in %.1f s" % (gguf_path, os.path.getsize(gguf_path) / 2**20,
                                                  time.perf_counter() - t0))
    prompt = make_prompt(a, a.device)
    greedy(model, prompt, 4)  # warm-up (kernels, allocator)
    toks, logits, t = greedy(model, prompt, a.tokens)
    ref = {"tokens": toks, "logits": logits, "tok_s": a.tokens / t, "experts_impl": impl}
    log("stock: %d tokens, %.1f tok/s (experts implementation: %s), first tokens %s" % (a.tokens, ref["tok_s"], impl,
                                                                                      toks[:8]))
    eng = served.Engine(model, spec, a.device, ahead=a.ahead, ahead_extra=a.ahead_extra, live=a.live)
    eng.install()
    for _, blk in eng.blocks:
        qwen_moe.drop_gpu_experts(blk)
    if a.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return model, spec, prompt, ref, eng


def check_cards(a, eng):
    if a.backend == "cuda" and not eng.cards:
        log("WARNING: no card of the daemon is this process's %s (cards: %s): every expert will miss"
            % (a.device, eng.c.cards))


def served_pass(a, model, prompt, ref, eng, client, label, before_step=None):
    import foresight

    eng.reset_counters()
    got = greedy(model, prompt, a.tokens, eng, before_step)
    row = compare(ref, got, label)
    ctr = eng.counters()
    row.update(hit_rate=ctr["hit_rate"], predictions=ctr["predictions"], miss_mib=ctr["miss_bytes"] / 2**20,
               hits=ctr["hits"], misses=ctr["misses"])
    try:
        st = client.stats()
        me = [x for x in st.get("clients", []) if x.get("pid") == os.getpid()]
        row["daemon_hit_rate"] = (me[0] if me else st["totals"]).get("hit_rate")
        row["daemon_totals"] = st.get("totals")
    except foresight.Error as e:
        row["note"] = "stats: %s" % e.message
    return row


# ---- modes ----------------------------------------------------------------------------


def mode_budgets(a, ctx, rows, budgets, mode="budgets", miss_path="copy"):
    import foresight

    model, spec, prompt, ref, eng, gguf = ctx
    for slots in budgets:
        sock = os.path.join(a.out, "fs-%s-%d.sock" % (mode, slots))
        d = Daemon(a, gguf, slots, sock, os.path.join(a.out, "foresightd.log"))
        try:
            d.start()
        except RuntimeError as e:
            rows.append({"mode": mode, "slots": slots, "note": "daemon did not start: %s" % str(e)[-200:]})
            continue
        try:
            c = foresight.Client(socket=sock, name="torch-%s-%d" % (mode, slots), model=spec.name)
            eng.miss_path = miss_path
            eng.connect(c)
            check_cards(a, eng)
            for p in (1, 2):
                row = served_pass(a, model, prompt, ref, eng, c, "%s slots %d pass %d" % (mode, slots, p))
                row.update(mode=mode, slots=slots, **{"pass": p})
                if miss_path == "cpu":
                    row["note"] = "misses on the CPU: bits not expected"
                rows.append(row)
                log(json.dumps({k: v for k, v in row.items() if k != "daemon_totals"}))
            eng.disconnect()
            c.close()
        finally:
            eng.miss_path = "copy"
            d.stop()


def mode_two_engines(a, ctx, rows, slots):
    import foresight

    model, spec, prompt, ref, eng, gguf = ctx
    sock = os.path.join(a.out, "fs-two.sock")
    d = Daemon(a, gguf, slots, sock, os.path.join(a.out, "foresightd.log")).start()
    ready, go, result = (os.path.join(a.out, "child.%s" % x) for x in ("ready", "go", "json"))
    for f in (ready, go, result):
        if os.path.exists(f):
            os.unlink(f)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--socket", sock, "--gguf", gguf, "--result", result,
           "--ready", ready, "--go", go, "--device", a.device, "--tokens", str(a.tokens), "--prompt-len",
           str(a.prompt_len), "--seed", str(a.seed), "--ahead", str(a.ahead), "--ahead-extra", str(a.ahead_extra),
           "--layers", str(a.layers), "--hidden", str(a.hidden), "--experts", str(a.experts), "--top-k", str(a.top_k),
           "--moe-ff", str(a.moe_ff), "--vocab", str(a.vocab), "--dtype", a.dtype, "--out", a.out]
    child = subprocess.Popen(cmd)
    try:
        if not wait_for(lambda: os.path.exists(ready) or child.poll() is not None, 600, 0.2) or child.poll():
            raise RuntimeError("the second engine did not get ready (exit %s)" % child.poll())
        c = foresight.Client(socket=sock, name="torch-engine-1", model=spec.name)
        eng.connect(c)
        open(go, "w").close()
        both = 0
        p = 0
        # Decode until the child is done (at least two passes): the two
        # engines share the tier the whole time.
        while p < 2 or child.poll() is None:
            p += 1
            row = served_pass(a, model, prompt, ref, eng, c, "two-engines pass %d" % p)
            try:
                both = max(both, len(c.stats().get("clients", [])))
            except foresight.Error:
                pass
            row.update(mode="two-engines", slots=slots, **{"pass": "engine 1 #%d" % p})
            rows.append(row)
            if p >= 20:
                break
        child.wait(600)
        eng.disconnect()
        c.close()
        with open(result) as f:
            for r in json.load(f):
                rows.append(r)
        rows[-1]["note"] = "clients attached together: %d" % both
        if child.returncode != 0:
            rows.append({"mode": "two-engines", "slots": slots, "tokens": False,
                         "note": "engine 2 exited %s" % child.returncode})
    finally:
        if child.poll() is None:
            child.kill()
        d.stop()


def mode_restart(a, ctx, rows, slots):
    import foresight

    model, spec, prompt, ref, eng, gguf = ctx
    sock = os.path.join(a.out, "fs-restart.sock")
    d = Daemon(a, gguf, slots, sock, os.path.join(a.out, "foresightd.log")).start()
    try:
        c = foresight.Client(socket=sock, name="torch-restart", model=spec.name)
        eng.connect(c)
        row = served_pass(a, model, prompt, ref, eng, c, "restart warm-up")
        row.update(mode="restart", slots=slots, **{"pass": "before"})
        rows.append(row)
        n = a.tokens
        events = {}

        def before_step(i):
            if i == n // 3:
                d.kill()
                events["killed_at_hits"] = eng.hits
                # Let the library see it (its background thread looks every
                # 100 ms) before the next acquire: a CUDA slot of a dead
                # daemon is not read (see README: the CUDA IPC question).
                wait_for(lambda: _empty_view(c), 5, 0.01)
                log("restart: daemon killed (SIGKILL) before step %d" % i)
            elif i == 2 * n // 3:
                events["outage_hits"] = eng.hits - events["killed_at_hits"]
                d.start()
                log("restart: a new daemon answers, before step %d" % i)

        row = served_pass(a, model, prompt, ref, eng, c, "restart", before_step)
        row.update(mode="restart", slots=slots, **{"pass": "kill -9 + restart"})
        rows.append(row)
        reattached = wait_for(lambda: c.attach_count >= 2 and c.attached, 60)
        row = served_pass(a, model, prompt, ref, eng, c, "restart after")
        row.update(mode="restart", slots=slots, **{"pass": "after"})
        row["note"] = "attaches %d, re-attached %s" % (c.attach_count, "yes" if reattached else "NO")
        if not reattached or row.get("hits", 0) == 0:
            row["tokens"] = row["tokens"] and reattached  # a daemon that never came back is a failure
        rows.append(row)
        eng.disconnect()
        c.close()
    finally:
        d.stop()


def _empty_view(c):
    with c.acquire() as v:
        return v.epoch == 0


def child_main(a):
    """The second engine of two-engines: its own model (same seed), its own
    stock reference, then served passes against the parent's daemon."""
    import foresight

    model, spec, prompt, ref, eng = build_all(a, a.gguf, export=False)
    c = foresight.Client(socket=a.socket, name="torch-engine-2", model=spec.name)
    eng.connect(c)
    open(a.ready, "w").close()
    wait_for(lambda: os.path.exists(a.go), 120, 0.05)
    rows = []
    for p in (1, 2):
        row = served_pass(a, model, prompt, ref, eng, c, "engine 2 pass %d" % p)
        row.update(mode="two-engines", slots="(shared)", **{"pass": "engine 2 #%d" % p})
        row.pop("daemon_totals", None)
        rows.append(row)
    eng.disconnect()
    c.close()
    with open(a.result, "w") as f:
        json.dump(rows, f)
    return 0 if all(r["tokens"] for r in rows) else 1


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        return child_main(a)
    import torch
    import transformers

    gguf = os.path.join(a.out, "model.gguf")
    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "backend": a.backend}
    log("environment: %s" % env)
    model, spec, prompt, ref, eng = build_all(a, gguf)
    env["experts_impl"] = ref["experts_impl"]
    rows = [{"mode": "stock", "slots": "all on GPU", "pass": 1, "tok_s": ref["tok_s"], "vs_stock": 1.0,
             "note": "experts: %s" % ref["experts_impl"]}]
    ctx = (model, spec, prompt, ref, eng, gguf)
    budgets = [int(x) for x in a.budgets.split(",") if x]
    modes = [m for m in a.modes.split(",") if m]
    mid = sorted(budgets)[len(budgets) // 2]
    for m in modes:
        log("== mode %s" % m)
        try:
            if m == "budgets":
                mode_budgets(a, ctx, rows, budgets)
            elif m == "two-engines":
                mode_two_engines(a, ctx, rows, mid)
            elif m == "restart":
                mode_restart(a, ctx, rows, mid)
            elif m == "cpu-path":
                mode_budgets(a, ctx, rows, [min(budgets)], mode="cpu-path", miss_path="cpu")
            else:
                raise ValueError("unknown mode %s" % m)
        except Exception as e:  # a mode that breaks is reported, the rest still runs
            import traceback

            traceback.print_exc()
            rows.append({"mode": m, "tokens": False, "note": "FAILED: %s: %s" % (type(e).__name__, e)})
    ok, why = report.verdict(rows)
    text = report.table(rows)
    print("\n" + text + "\n\n" + ("PASS: " if ok else "FAIL: ") + why, flush=True)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("# foresight: a transformers Qwen3-MoE model served by foresightd\n\n")
        f.write("Environment: `%s`\n\nModel: `%s`, %d decode tokens after a %d-token prompt, "
                "router-ahead %d layers (top-%d + %d).\n\n" % (json.dumps(env), json.dumps(spec.as_dict()),
                                                                 a.tokens, a.prompt_len, a.ahead, spec.top_k,
                                                                 a.ahead_extra))
        f.write(text + "\n\n" + ("PASS: " if ok else "FAIL: ") + why + "\n")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"env": env, "spec": spec.as_dict(), "ref_tokens": ref["tokens"], "rows": rows}, f, indent=1,
                  default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

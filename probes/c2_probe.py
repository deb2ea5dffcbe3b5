"""C2 probe (stdlib only at import time, Python 3.8+): does the framework build agree with the driver and GPU?

Usage: PYTHON c2_probe.py --out FILE [--timeout S]

Run by the report's interpreter PYTHON itself, with CUDA_VISIBLE_DEVICES set by the host to the
sandbox's assigned devices (numbered from 0). Grading is separate and pure
(reb_ray/grading/c2.py). The probe observes and installs nothing; bytecode writing is off.

It is two processes: this supervisor (stdlib only) starts itself again as a worker with the
same interpreter (`-X faulthandler -B`, from an empty temporary directory) and a deadline of S
seconds (default 240). The worker imports the framework and runs the kernel; it rewrites its
partial record at every stage, so a worker that segfaults in a CUDA library or hangs in driver
initialisation still leaves what it saw plus the stage it died in, and its real stderr (where
native code prints) is captured. The supervisor always writes one JSON object to FILE
(atomically) with these keys:

    framework            "torch" when torch is installed (even if its import fails), else
                         "tensorflow" / "jax" when installed (preferring one whose GPU op ran), else null
    torch_present, torch_file, torch_version, cuda_build (torch.version.cuda), hip_build,
    cuda_available, device_count, device_names [str], capabilities ["9.0", ...] per device,
    arch_list (torch.cuda.get_arch_list(); the compiled flags when that is empty because CUDA
    is unavailable: see arch_list_source), device_errors [str],
    kernel_attempted, kernel_ok, kernel_error, kernel_max_abs_err, kernel_device, kernel_s
    import_error         traceback tail of `import torch` (null when it imported or is absent)
    warnings             every Python warning raised during import / CUDA init / the kernel, as
                         "Category: message" (each bounded), in order
    tf, jax              null, or a dict of that framework's facts (probed when torch is absent)
    cuda_visible_devices os.environ.get("CUDA_VISIBLE_DEVICES")
    nvidia_driver        /proc/driver/nvidia/version's first line, or null
    libcuda_driver_cuda  cuDriverGetVersion() via ctypes (e.g. 12080), or null; libcuda_error
    stage                the last stage the worker began: start, import, devices, kernel, tf, jax, done
    worker_exit_code, worker_timed_out, worker_error, stderr_tail, worker_stdout_tail
    python, python_version, probe_version, duration_s, probe_error (only when the probe failed)

The kernel (torch, device 0): two 256x256 float32 matrices of small integers (exact in every
float format, so TF32 or bf16 matmul paths cannot cause a false mismatch) are copied to the
device, multiplied (cuBLAS), then scaled by an elementwise kernel of torch's own; after
`torch.cuda.synchronize()` the result is compared with the same computation on the CPU. It is
attempted on every CUDA build, even when `is_available()` is False, to record the real error.
TensorFlow and JAX run the same computation on their first GPU.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

PROBE_VERSION = 1
TAIL_CHARS = 4000
ERROR_CHARS = 3000
WARNING_CHARS = 2000
MAX_WARNINGS = 50
N = 256
TOLERANCE = 1e-3
STAGES = ("start", "import", "devices", "kernel", "tf", "jax", "done")


def tail(text, n=TAIL_CHARS):
    return text[-n:] if text else ""


def exc_tail():
    return tail(traceback.format_exc(), ERROR_CHARS)


def write_json(path, rec):
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(rec, f, default=str)
    os.replace(tmp, path)


def base_record():
    return {
        "probe_version": PROBE_VERSION, "framework": None, "torch_present": False, "torch_file": None,
        "torch_version": None, "cuda_build": None, "hip_build": None, "cuda_available": None,
        "device_count": None, "device_names": [], "capabilities": [], "arch_list": [], "arch_list_source": None,
        "device_errors": [], "kernel_attempted": False, "kernel_ok": False, "kernel_error": None,
        "kernel_max_abs_err": None, "kernel_device": None, "kernel_s": None, "import_error": None,
        "warnings": [], "tf": None, "jax": None, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "stage": "start",
    }


# ------------------------------------------------------------------------------ worker side


class Recorder(object):
    """The worker's record, rewritten to `path` at every stage."""

    def __init__(self, path):
        self.path = path
        self.rec = base_record()
        self.save()

    def stage(self, name):
        self.rec["stage"] = name
        self.save()

    def save(self):
        write_json(self.path, self.rec)

    def warn(self, caught):
        for w in caught:
            if len(self.rec["warnings"]) >= MAX_WARNINGS:
                break
            text = "%s: %s" % (getattr(w.category, "__name__", "Warning"), w.message)
            self.rec["warnings"].append(text[:WARNING_CHARS])


def capturing(recorder, fn):
    """Run fn() recording every warning it raises; returns (value, None) or (None, traceback tail)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return fn(), None
        except BaseException:  # a broken package may raise anything, SystemExit included
            return None, exc_tail()
        finally:
            recorder.warn(caught)


def installed(name):
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except BaseException:  # a broken parent package or a bad .pth entry
        return False


def operands():
    """Two N x N row-major matrices of small integers, as nested lists."""
    a = [[float((i * 7 + j * 3) % 7) for j in range(N)] for i in range(N)]
    b = [[float((i * 5 + j * 11 + 1) % 5) for j in range(N)] for i in range(N)]
    return a, b


def torch_probe(r):
    rec = r.rec
    rec["framework"], rec["torch_present"] = "torch", True
    r.stage("import")
    torch, rec["import_error"] = capturing(r, lambda: __import__("torch"))
    if torch is None:
        return
    rec["torch_file"] = getattr(torch, "__file__", None)
    rec["torch_version"] = str(getattr(torch, "__version__", None))
    version = getattr(torch, "version", None)
    rec["cuda_build"] = getattr(version, "cuda", None)
    rec["hip_build"] = getattr(version, "hip", None)
    r.stage("devices")
    cuda = torch.cuda

    def facts():
        rec["cuda_available"] = bool(cuda.is_available())
        rec["device_count"] = int(cuda.device_count())
        arch, source = list(cuda.get_arch_list()), "get_arch_list"
        flags_fn = getattr(torch._C, "_cuda_getArchFlags", None)
        if not arch and rec["cuda_build"] and flags_fn is not None:
            flags = flags_fn()  # compile-time flags: known even when no device can be seen
            arch, source = (flags.split() if flags else []), "_cuda_getArchFlags"
        rec["arch_list"], rec["arch_list_source"] = arch, source

    _, err = capturing(r, facts)
    if err:
        rec["device_errors"].append(err)
    for i in range(rec["device_count"] or 0):
        name, err = capturing(r, lambda: str(cuda.get_device_name(i)))
        cap, err2 = capturing(r, lambda: "%d.%d" % tuple(cuda.get_device_capability(i)))
        rec["device_names"].append(name)
        rec["capabilities"].append(cap)
        rec["device_errors"].extend(e for e in (err, err2) if e)
    if rec["cuda_build"] is None:
        return  # a CPU-only (or ROCm) build: there is no CUDA kernel to run
    r.stage("kernel")
    rec["kernel_attempted"], rec["kernel_device"] = True, "cuda:0"

    def kernel():
        started = time.time()
        a, b = operands()
        ca, cb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
        expected = (ca @ cb) * 2.0 + 1.0
        da, db = ca.to("cuda:0"), cb.to("cuda:0")
        out = (da @ db) * 2.0 + 1.0
        torch.cuda.synchronize(0)
        got = out.cpu()
        err = float((got - expected).abs().max().item())
        rec["kernel_max_abs_err"], rec["kernel_s"] = err, round(time.time() - started, 3)
        if not err <= TOLERANCE * float(expected.abs().max().item()):
            raise AssertionError("kernel result differs from the CPU: max abs error %g" % err)
        return True

    ok, rec["kernel_error"] = capturing(r, kernel)
    rec["kernel_ok"] = bool(ok)


def numpy_expected():
    import numpy as np

    a, b = operands()
    a, b = np.array(a, dtype=np.float32), np.array(b, dtype=np.float32)
    return a, b, a @ b * 2.0 + 1.0


def tf_probe(r):
    rec = {"present": True, "version": None, "built_with_cuda": None, "build_info": None, "gpus": [],
           "import_error": None, "error": None, "op_ok": False, "op_error": None, "op_device": None}
    r.rec["tf"] = rec
    r.stage("tf")
    tf, rec["import_error"] = capturing(r, lambda: __import__("tensorflow"))
    if tf is None:
        return

    def facts():
        rec["version"] = str(getattr(tf, "__version__", None))
        rec["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
        info = dict(tf.sysconfig.get_build_info())
        rec["build_info"] = {k: str(v) for k, v in info.items()}
        rec["gpus"] = [str(d.name) for d in tf.config.list_physical_devices("GPU")]

    _, rec["error"] = capturing(r, facts)
    r.save()
    if not rec["gpus"]:
        return

    def op():
        a, b, expected = numpy_expected()
        with tf.device("/GPU:0"):
            out = tf.matmul(tf.constant(a), tf.constant(b)) * 2.0 + 1.0
        rec["op_device"] = str(out.device)
        if "GPU" not in rec["op_device"].upper():
            raise RuntimeError("the op ran on %s, not on a GPU" % rec["op_device"])
        err = float(abs(out.numpy() - expected).max())
        if not err <= TOLERANCE * float(abs(expected).max()):
            raise AssertionError("GPU result differs from numpy: max abs error %g" % err)
        return True

    ok, rec["op_error"] = capturing(r, op)
    rec["op_ok"] = bool(ok)


JAX_CUDA_MODULES = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_cuda11_plugin", "jax_plugins.xla_cuda13",
                    "jax_plugins.xla_cuda12", "jax_plugins.xla_cuda11")


def jax_probe(r):
    rec = {"present": True, "version": None, "jaxlib_version": None, "cuda_plugins": [], "backend": None,
           "devices": [], "gpu_devices": [], "gpu_error": None, "import_error": None, "error": None,
           "op_ok": False, "op_error": None, "op_device": None}
    r.rec["jax"] = rec
    r.stage("jax")
    rec["cuda_plugins"] = [m for m in JAX_CUDA_MODULES if installed(m)]
    jax, rec["import_error"] = capturing(r, lambda: __import__("jax"))
    if jax is None:
        return

    def facts():
        rec["version"] = str(getattr(jax, "__version__", None))
        try:
            import jaxlib

            rec["jaxlib_version"] = str(getattr(jaxlib, "__version__", None))
        except ImportError:
            pass
        rec["backend"] = str(jax.default_backend())
        rec["devices"] = ["%s:%s:%s" % (d.platform, d.id, getattr(d, "device_kind", "")) for d in jax.devices()]

    _, rec["error"] = capturing(r, facts)
    gpus, rec["gpu_error"] = capturing(r, lambda: jax.devices("gpu"))
    rec["gpu_devices"] = ["%s:%s:%s" % (d.platform, d.id, getattr(d, "device_kind", "")) for d in gpus or []]
    r.save()
    if not gpus:
        return

    def op():
        a, b, expected = numpy_expected()
        x, y = jax.device_put(a, gpus[0]), jax.device_put(b, gpus[0])
        out = ((x @ y) * 2.0 + 1.0).block_until_ready()
        devices = out.devices() if hasattr(out, "devices") else {out.device()}
        rec["op_device"] = ",".join(str(d) for d in devices)
        import numpy as np

        err = float(np.abs(np.asarray(out) - expected).max())
        if not err <= TOLERANCE * float(abs(expected).max()):
            raise AssertionError("GPU result differs from numpy: max abs error %g" % err)
        return True

    ok, rec["op_error"] = capturing(r, op)
    rec["op_ok"] = bool(ok)


def worker(path):
    sys.dont_write_bytecode = True
    r = Recorder(path)
    if installed("torch"):
        torch_probe(r)
    else:
        for name, fn in (("tensorflow", tf_probe), ("jax", jax_probe)):
            if installed(name):
                fn(r)
        tf, jx = r.rec["tf"] or {}, r.rec["jax"] or {}
        if tf.get("op_ok") or (tf and not jx.get("op_ok")):
            r.rec["framework"] = "tensorflow"
        elif jx:
            r.rec["framework"] = "jax"
    r.stage("done")
    return 0


# ------------------------------------------------------------------------------ supervisor side


def driver_facts():
    """What the node's NVIDIA driver says, without initialising CUDA (stdlib: /proc and ctypes)."""
    out = {"nvidia_driver": None, "libcuda_driver_cuda": None, "libcuda_error": None}
    try:
        with open("/proc/driver/nvidia/version") as f:
            out["nvidia_driver"] = f.readline().strip()[:300] or None
    except (OSError, ValueError):
        pass
    try:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        rc = lib.cuDriverGetVersion(ctypes.byref(version))
        if rc == 0:
            out["libcuda_driver_cuda"] = version.value
        else:
            out["libcuda_error"] = "cuDriverGetVersion returned %d" % rc
    except Exception as exc:  # no libcuda in the sandbox: no GPU wiring
        out["libcuda_error"] = ("%s: %s" % (type(exc).__name__, exc))[:300]
    return out


def read_tail(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - TAIL_CHARS * 4))
            return tail(f.read().decode("utf-8", "replace"))
    except OSError:
        return ""


def run_worker(timeout, tmp):
    """Run the worker; returns (partial record or None, exit code, timed out, stderr tail, stdout tail)."""
    partial = os.path.join(tmp, "worker.json")
    err_path, out_path = os.path.join(tmp, "stderr"), os.path.join(tmp, "stdout")
    cwd = os.path.join(tmp, "cwd")
    os.mkdir(cwd)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    argv = [sys.executable or "python3", "-X", "faulthandler", "-B", os.path.abspath(__file__), "--worker", partial]
    timed_out = False
    with open(err_path, "wb") as err, open(out_path, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env,
                                start_new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            code = proc.wait()
    try:
        with open(partial) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        rec = None
    return rec, code, timed_out, read_tail(err_path), read_tail(out_path)


def signal_name(code):
    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return "signal %d" % -code


def probe(args):
    started = time.time()
    rec = base_record()
    rec.update(python=sys.executable, python_version="%d.%d.%d" % tuple(sys.version_info[:3]))
    rec.update(driver_facts())
    tmp = tempfile.mkdtemp(prefix="reb-ray-c2-")
    try:
        partial, code, timed_out, err_tail, out_tail = run_worker(args.timeout, tmp)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    if partial:
        rec.update(partial)
    rec.update(worker_exit_code=code, worker_timed_out=timed_out, stderr_tail=err_tail, worker_stdout_tail=out_tail,
               worker_error=None)
    stage = rec.get("stage")
    if timed_out:
        rec["worker_error"] = "the probe worker timed out after %gs in stage %r" % (args.timeout, stage)
    elif code is not None and code < 0:
        rec["worker_error"] = "the probe worker died of %s in stage %r" % (signal_name(code), stage)
    elif code != 0 or partial is None or stage != "done":
        rec["worker_error"] = "the probe worker exited %s in stage %r" % (code, stage)
    if rec["worker_error"]:
        # Put the death where the grader looks for that stage's failure.
        if stage == "import" and not rec.get("import_error"):
            rec["import_error"] = rec["worker_error"]
        elif stage in ("devices", "kernel") and not rec.get("kernel_error"):
            rec["kernel_error"] = rec["worker_error"]
            rec["kernel_ok"] = False
        elif stage in ("tf", "jax") and isinstance(rec.get(stage), dict) and not rec[stage].get("op_error"):
            rec[stage]["op_error"] = rec["worker_error"]
    rec["duration_s"] = round(time.time() - started, 3)
    return rec


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where the JSON record is written")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds for the worker (import + kernel)")
    parser.add_argument("--worker", metavar="PARTIAL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    if not args.out:
        parser.error("--out is required")
    try:
        rec = probe(args)
    except Exception as exc:  # still write a record: the grader reports what is known
        rec = base_record()
        rec["probe_error"] = "%s: %s" % (type(exc).__name__, exc)
        rec["stage"] = None
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    write_json(args.out, rec)
    sys.stdout.write("c2 probe: framework %s, torch %s, cuda build %s, devices %s, kernel ok %s, %.1fs\n" % (
        rec.get("framework"), rec.get("torch_version"), rec.get("cuda_build"), rec.get("device_count"),
        rec.get("kernel_ok"), rec.get("duration_s") or 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

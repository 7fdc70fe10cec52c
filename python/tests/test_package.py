"""The package without a job: dtype and op mapping, buffers, and finding (or not) libweft.so."""
import array
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import weft
from weft.dtypes import from_format, to_dtype, to_op


def test_numpy_dtypes_map_to_weft():
    for name in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                 "float64"):
        dt = to_dtype(np.dtype(name))
        assert dt.name.lower() == name and dt.itemsize == np.dtype(name).itemsize
        assert weft.as_buffer(np.zeros(3, name)).dtype == dt
    assert to_dtype("bfloat16") == weft.BFLOAT16 and weft.BFLOAT16.itemsize == 2
    # fp8: weft's names, and torch's / ml_dtypes' for e4m3 "fn".
    assert to_dtype("float8_e4m3") == to_dtype("float8_e4m3fn") == weft.FLOAT8_E4M3
    assert to_dtype("float8_e5m2") == weft.FLOAT8_E5M2 == weft.Dtype(11)
    assert weft.FLOAT8_E4M3.itemsize == weft.FLOAT8_E5M2.itemsize == 1
    assert weft.FLOAT8_E4M3.is_floating and weft.FLOAT8_E5M2.is_floating
    assert len(weft.Dtype) == 12
    assert to_dtype(np.float32) == weft.FLOAT32
    with pytest.raises(TypeError, match="int16"):
        to_dtype(np.int16)
    with pytest.raises(TypeError, match="complex128"):
        weft.as_buffer(np.zeros(2, np.complex128))


def test_dtype_enum_matches_the_library():
    lib = weft._lib.load()
    for dt in weft.Dtype:
        assert lib.weft_dtype_size(int(dt)) == dt.itemsize
        assert lib.weft_dtype_name(int(dt)).decode() == dt.name.lower()
    for op in weft.Op:
        assert lib.weft_op_name(int(op)).decode() == op.name.lower()
    for algo in weft.Algo:
        assert lib.weft_algo_name(int(algo)).decode() == algo.name.lower()
    for coll in weft.Coll:
        assert lib.weft_coll_name(int(coll)).decode() == coll.name.lower()
    for res in weft.Result:
        assert lib.weft_result_string(int(res))


def test_buffer_formats():
    assert from_format("<f", 4) == weft.FLOAT32 and from_format("=q", 8) == weft.INT64
    assert from_format("h", 2) is None
    assert weft.as_buffer(array.array("d", [1.0, 2.0])).count == 2
    assert weft.as_buffer(bytearray(8), dtype="float16").count == 4
    assert weft.as_buffer(bytearray(8), dtype="float8_e4m3").count == 8
    with pytest.raises(ValueError, match="whole number"):
        weft.as_buffer(bytearray(7), dtype="int32")
    assert to_op("SUM") == weft.SUM and to_op("product") == weft.PROD
    with pytest.raises(ValueError, match="band"):
        to_op("band")


def test_buffer_keeps_its_owner_alive():
    buf = weft.as_buffer(np.arange(4, dtype=np.int32))
    ptr = buf.address
    view = (np.ctypeslib.as_array((np.ctypeslib.ctypes.c_int32 * 4).from_address(ptr)))
    assert list(view) == [0, 1, 2, 3]
    assert "int32" in repr(buf)


def _run_python(code, env):
    # From the folder holding the copy: `python -c` puts the working directory first on the path.
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, cwd=env["PYTHONPATH"])


def _env_without_library(tmp_path):
    """A copy of the package without libweft.so next to it, first on the path."""
    src = os.path.dirname(weft.__file__)
    shutil.copytree(src, tmp_path / "weft", ignore=shutil.ignore_patterns("libweft.so*",
                                                                           "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "WEFT_LIBRARY"}
    env["PYTHONPATH"] = str(tmp_path)
    return env


def test_library_not_found_says_how_to_build_it(tmp_path):
    env = _env_without_library(tmp_path)
    code = ("import weft\n"  # importing works without the library: it loads on first use
            "assert weft.__file__.startswith(%r)\n"
            "try:\n"
            "    weft.Comm(rank=0, size=1, master_addr='127.0.0.1', master_port=1)\n"
            "except weft.LibraryNotFoundError as e:\n"
            "    print(e)\n"
            "    assert isinstance(e, weft.WeftError) and isinstance(e, ImportError)\n") % str(tmp_path)
    r = _run_python(code, env)
    assert r.returncode == 0, r.stderr
    assert "libweft.so not found" in r.stdout and "bazel build //:libweft.so" in r.stdout, r.stdout
    assert "WEFT_LIBRARY" in r.stdout


def test_weft_library_variable(tmp_path):
    env = _env_without_library(tmp_path)
    env["WEFT_LIBRARY"] = str(tmp_path / "nowhere" / "libweft.so")
    r = _run_python("import weft\ntry:\n    weft.version()\nexcept weft.LibraryNotFoundError as e:"
                    "\n    print(e)\n", env)
    assert r.returncode == 0, r.stderr
    assert "WEFT_LIBRARY=" in r.stdout and "no such file" in r.stdout, r.stdout
    # Pointing it at the real library works from anywhere.
    env["WEFT_LIBRARY"] = weft.library_path()
    r = _run_python("import weft\nprint(weft.version(), weft.library_path())", env)
    assert r.returncode == 0, r.stderr
    assert weft.library_path() in r.stdout


def test_not_a_weft_library(tmp_path):
    env = _env_without_library(tmp_path)
    bogus = tmp_path / "libweft.so"
    bogus.write_bytes(b"not an ELF file")
    env["WEFT_LIBRARY"] = str(bogus)
    r = _run_python("import weft\ntry:\n    weft.version()\nexcept weft.LibraryNotFoundError as e:"
                    "\n    print(e)\n", env)
    assert r.returncode == 0, r.stderr
    assert "cannot load" in r.stdout, r.stdout


def test_single_rank_without_launcher_variables(tmp_path):
    # An explicit one-rank job needs no environment at all.
    port = __import__("multiproc").free_ports(1)[0]
    with weft.Comm(rank=0, size=1, master_addr="127.0.0.1", master_port=port) as comm:
        x = np.arange(5, dtype=np.float64)
        comm.all_reduce(x, op="avg")
        assert np.array_equal(x, np.arange(5, dtype=np.float64))
        assert repr(comm) == "<weft.Comm rank 0 of 1>"
    assert comm.closed


def test_torch_backend_without_library(tmp_path):
    pytest.importorskip("torch")
    env = _env_without_library(tmp_path)
    port = __import__("multiproc").free_ports(1)[0]
    code = ("import torch.distributed as dist, weft, weft.torch\n"
            "assert hasattr(dist.Backend, 'WEFT')  # registered without the library\n"
            "try:\n"
            "    dist.init_process_group('weft', init_method='tcp://127.0.0.1:%d', rank=0,\n"
            "                            world_size=1)\n"
            "except weft.LibraryNotFoundError as e:\n"
            "    print(e)\n") % port
    r = _run_python(code, env)
    assert r.returncode == 0, r.stderr
    assert "bazel build //:libweft.so" in r.stdout, r.stdout

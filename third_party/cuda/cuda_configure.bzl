"""Detects the CUDA toolkit and exposes it as @local_config_cuda.

The toolkit is looked for in $CUDA_HOME, then /usr/local/cuda. `--repo_env=WEFT_CUDA=0` (the `nocuda`
config in .bazelrc) forces a CPU-only build even where the toolkit is installed, so both ways can be
built and tested on one machine. The generated repository always has the same targets; in a CPU-only
build they are empty, so BUILD files select on `CUDA_ENABLED` instead of failing to load.
"""

def _find_cuda(ctx):
    if ctx.os.environ.get("WEFT_CUDA", "1") == "0":
        return None
    candidates = []
    if ctx.os.environ.get("CUDA_HOME"):
        candidates.append(ctx.os.environ["CUDA_HOME"])
    candidates.append("/usr/local/cuda")
    for home in candidates:
        if ctx.path(home + "/bin/nvcc").exists and ctx.path(home + "/lib64/libcudart_static.a").exists:
            return home
    return None

def _cuda_configure_impl(ctx):
    home = _find_cuda(ctx)
    if home:
        ctx.symlink(home + "/include", "include")
        ctx.symlink(home + "/lib64/libcudart_static.a", "lib/libcudart_static.a")
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp"]),
    includes = ["include"],
)
# The runtime is linked statically so that only the driver is needed where weft runs.
cc_library(
    name = "cudart_static",
    srcs = ["lib/libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
    deps = [":cuda_headers"],
)
""")
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_headers")
cc_library(name = "cudart_static")
""")
    ctx.file("defs.bzl", """
CUDA_ENABLED = {enabled}
CUDA_HOME = "{home}"
NVCC = "{nvcc}"
""".format(
        enabled = "True" if home else "False",
        home = home or "",
        nvcc = (home + "/bin/nvcc") if home else "",
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME", "WEFT_CUDA"],
    local = True,
)

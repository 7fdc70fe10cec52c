#!/usr/bin/env bash
# weft_info_test.sh -- runs weft-info (text and --json) with knobs set in its environment and
# checks what it reports: exit 0, valid JSON, every transport listed with tcp and shm usable and a
# reason wherever one is not, knob values as config.c parses them, unknown WEFT_* flagged, a bad
# value reported without failing, the job token never printed, and algorithm names that WEFT_ALGO
# accepts for all_reduce.
set -euo pipefail
info=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}

env -i PATH="$PATH" WEFT_NSOCKS=3 WEFT_SLICE_BYTES=128K WEFT_FOO=1 WEFT_RANK=0 \
  WEFT_JOB_TOKEN=s3cr3t-token "$info" >"$tmp/text.txt"
env -i PATH="$PATH" WEFT_NSOCKS=3 WEFT_SLICE_BYTES=128K WEFT_FOO=1 WEFT_RANK=0 \
  WEFT_JOB_TOKEN=s3cr3t-token "$info" --json --ranks 4 >"$tmp/info.json"
env -i PATH="$PATH" WEFT_TIMEOUT_MS=soon WEFT_NSOCK=2 "$info" --json >"$tmp/bad.json"
env -i PATH="$PATH" WEFT_ALGO=all_reduce=no_such_algo "$info" --json >"$tmp/badalgo.json"

if grep -q s3cr3t "$tmp/text.txt" "$tmp/info.json"; then
  echo "FAIL: the job token was printed" >&2
  exit 1
fi
for want in "transports:" "name: tcp" "name: shm" "name: rdma" "name: cuda_ipc" "WEFT_FOO" \
  "algorithms:"; do
  grep -qF "$want" "$tmp/text.txt" || { echo "FAIL: text output lacks '$want'" >&2; exit 1; }
done
# Wrong arguments are refused with exit 2.
if "$info" --ranks 0 >/dev/null 2>&1; then echo "FAIL: --ranks 0 accepted" >&2; exit 1; fi
if "$info" --transport carrier-pigeon >/dev/null 2>&1; then
  echo "FAIL: an unknown transport accepted" >&2
  exit 1
fi

python3 - "$tmp" "$info" <<'PY'
import json, os, re, subprocess, sys

tmp, info = sys.argv[1], sys.argv[2]
def load(name):
    with open(os.path.join(tmp, name)) as f:
        return json.load(f)

d = load("info.json")
assert d["build"]["version"].count(".") == 2, d["build"]
assert isinstance(d["build"]["cuda"], bool)
# A CUDA build names the architectures its kernels were compiled for; a CPU-only one none.
targets = d["build"]["cuda_targets"]
if d["build"]["cuda"]:
    assert targets and all(re.fullmatch(r"(sm|compute)_[0-9]+a?", x) for x in targets.split()), targets
    assert "sm_" in targets, targets
else:
    assert targets is None, targets

t = {x["name"]: x for x in d["transports"]}
assert set(t) == {"tcp", "shm", "cuda_ipc", "staged", "rdma"}, sorted(t)
for name, x in t.items():
    assert isinstance(x["usable"], bool), x
    assert x["usable"] or x.get("why"), f"{name} is not usable and says not why: {x}"
assert t["tcp"]["usable"] and t["tcp"]["interfaces"], t["tcp"]
assert t["tcp"]["advertised"]["to_this_host"], t["tcp"]
assert t["shm"]["usable"] and t["shm"]["dev_shm_size_bytes"] > 0, t["shm"]
if not os.path.exists("/dev/infiniband"):
    assert not t["rdma"]["usable"] and not t["rdma"]["ports"], t["rdma"]
have_driver = subprocess.run(["sh", "-c", "ldconfig -p | grep -q 'libcuda.so.1 '"]).returncode == 0
if not have_driver or not d["build"]["cuda"]:
    for name in ("cuda_ipc", "staged"):
        assert not t[name]["usable"], t[name]
    assert not t["cuda_ipc"]["devices"], t["cuda_ipc"]

env = d["environment"]
assert env["valid"], env
knobs = {k["name"]: k for k in env["knobs"]}
assert knobs["WEFT_NSOCKS"]["value"] == "3" and knobs["WEFT_NSOCKS"]["default"] == "1", knobs
assert knobs["WEFT_SLICE_BYTES"]["value"] == "131072", knobs  # 128K as config.c reads it
assert knobs["WEFT_JOB_TOKEN"]["value"] == "(set)", knobs
assert env["unknown"] == ["WEFT_FOO"], env["unknown"]
assert env["other"] == ["WEFT_RANK=0"], env["other"]

bad = load("bad.json")["environment"]
assert not bad["valid"] and "WEFT_TIMEOUT_MS" in bad["error"], bad
assert bad["unknown"] == ["WEFT_NSOCK"] and bad["did_you_mean"] == ["WEFT_NSOCK: WEFT_NSOCKS?"], bad
assert env["did_you_mean"] == [], env  # WEFT_FOO is near no knob
badknob = {k["name"]: k for k in bad["knobs"]}["WEFT_TIMEOUT_MS"]
assert "not an integer" in badknob["error"] and "value" not in badknob, badknob

# The reduction loops' widest copy that this CPU runs (kernels/reduce_avx2.c).
cpu_avx2 = re.search(r"^flags\s*:.*\bavx2\b", open("/proc/cpuinfo").read(), re.M) is not None
assert d["build"]["host_reductions"] == ("avx2" if cpu_avx2 else "baseline"), d["build"]

a = d["algorithms"]
assert a["ranks"] == 4 and a["transport"] == "shm" and a["collective"] == "all_reduce", a
assert [c["size"] for c in a["choices"]] == ["1 KiB", "1 MiB", "256 MiB"], a
# Four ranks on one host: more than its CPUs, and each dependent round also pays a wake.
assert a["host_cpus"] == os.cpu_count(), a
assert (float(a["wake_s_per_round"]) > 0) == (4 > os.cpu_count()), a
for c in a["choices"]:
    name = c["algorithm"]
    assert name and not c["forced_by_WEFT_ALGO"] and c["predicted_us"] > 0, c
    # A name of the table: WEFT_ALGO accepts it for all_reduce and the choice follows it.
    forced = json.loads(subprocess.run(
        [info, "--json", "--ranks", "4"], check=True, capture_output=True, text=True,
        env={"PATH": os.environ["PATH"], "WEFT_ALGO": "all_reduce=" + name}).stdout)
    fa = forced["algorithms"]
    assert "algo_error" not in fa, fa
    assert all(x["algorithm"] == name and x["forced_by_WEFT_ALGO"] for x in fa["choices"]), fa
# An interface list that matches nothing leaves no address to advertise: tcp cannot start.
tcp = {x["name"]: x for x in json.loads(subprocess.run(
    [info, "--json"], check=True, capture_output=True, text=True,
    env={"PATH": os.environ["PATH"], "WEFT_SOCKET_IFNAME": "=no-such-if0"}).stdout)["transports"]}["tcp"]
assert not tcp["usable"] and "no-such-if0" in tcp["why"], tcp
ba = load("badalgo.json")["algorithms"]
assert "no_such_algo" in ba["algo_error"], ba
print("weft-info:", ", ".join(f'{c["size"]} {c["algorithm"]}' for c in a["choices"]))
PY
echo PASS

#!/usr/bin/env python3
"""make_seeds.py -- writes the fuzz targets' seed corpus, tests/fuzz/corpus/<target>/, from the
wire layouts that bootstrap/store_wire.h, transport/tcp_wire.h, collectives/call_desc.h and
comm/tune_file.c document: a few real messages per target, so that fuzzing starts past the magic
numbers and hellos. Run it again after a layout changes; fuzz.sh only reads the corpus."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

STORE_MAGIC, STORE_VERSION = 0x54534657, 1
HELLO, SET, GET, ADD, WAIT, REPLY = 1, 2, 3, 4, 5, 6
OK, TIMEOUT, BAD_VERSION, BAD_JOB, BAD_SIZE, BAD_RANK, NOT_INTEGER = range(7)
NO_TIMEOUT = 0xFFFFFFFF
JOB, WORLD = 0x7466656677656674, 4  # the identity store_server_fuzz.c and store_client_fuzz.c use


def store_msg(typ, key=b"", val=b"", arg=0, timeout=0, status=0, version=STORE_VERSION):
    hdr = struct.pack("<IHHIIqII", STORE_MAGIC, version, typ, len(key), len(val), arg, timeout,
                      status)
    return hdr + key + val


def hello_body(job=JOB, world=WORLD, rank=1):
    return struct.pack("<QiI", job, world, rank)


def keys(*ks):
    return b"".join(struct.pack("<I", len(k)) + k for k in ks)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def store():
    hello = store_msg(HELLO, val=hello_body())
    # Requests, as a client sends them (store_wire, store_server).
    requests = {
        "hello_set_get": hello + store_msg(SET, b"k", b"v1") + store_msg(GET, b"k", timeout=0),
        "hello_add_add_get": hello + store_msg(ADD, b"n", arg=5) + store_msg(ADD, b"n", arg=-7)
        + store_msg(GET, b"n", timeout=10),
        "hello_set_wait": hello + store_msg(SET, b"a", b"x")
        + store_msg(WAIT, val=keys(b"a", b"bb"), arg=2, timeout=0),
        "hello_get_missing": hello + store_msg(GET, b"nope", timeout=0),
        "hello_set_add_text": hello + store_msg(SET, b"t", b"text") + store_msg(ADD, b"t", arg=1),
        "hello_other_job": store_msg(HELLO, val=hello_body(job=1)),
        "hello_other_size": store_msg(HELLO, val=hello_body(world=8)),
        "hello_bad_rank": store_msg(HELLO, val=hello_body(rank=9)),
        "hello_version_2": store_msg(HELLO, val=hello_body(), version=2),
        "wait_forever_then_more": hello + store_msg(WAIT, val=keys(b"z"), arg=1,
                                                    timeout=NO_TIMEOUT) + store_msg(SET, b"z", b"")
    }
    for name, data in requests.items():
        write("store_server", name, data)
        write("store_wire", name, data)
    write("store_wire", "keys", keys(b"a", b"bb", b"ccc"))
    # Masters' answers (store_client): one byte for the order of GET, SET, ADD, WAIT, then the
    # replies; order 0 is GET, SET, ADD, WAIT.
    ok_hello = store_msg(REPLY, val=hello_body(rank=1), status=OK)
    answers = {
        "all_ok": bytes([0]) + ok_hello + store_msg(REPLY, val=b"value", status=OK)
        + store_msg(REPLY, status=OK) + store_msg(REPLY, arg=3, status=OK)
        + store_msg(REPLY, status=OK),
        "timeouts": bytes([0]) + ok_hello + store_msg(REPLY, status=TIMEOUT)
        + store_msg(REPLY, status=OK) + store_msg(REPLY, status=NOT_INTEGER, val=b"why")
        + store_msg(REPLY, status=TIMEOUT, arg=1, val=keys(b"bb")),
        "long_value": bytes([0]) + ok_hello + store_msg(REPLY, val=b"0123456789abcdef", status=OK),
        "refused_job": bytes([0]) + store_msg(REPLY, val=hello_body(job=2), status=BAD_JOB),
        "refused_size": bytes([0]) + store_msg(REPLY, val=hello_body(world=2), status=BAD_SIZE),
        "refused_rank": bytes([0]) + store_msg(REPLY, val=hello_body(), status=BAD_RANK),
        "other_version": bytes([0]) + store_msg(REPLY, arg=2, status=BAD_VERSION, version=2),
        "not_weft": bytes([0]) + b"HTTP/1.1 400 Bad Request\r\n\r\n" + bytes(8),
    }
    for name, data in answers.items():
        write("store_client", name, data)
        write("store_wire", "reply_" + name, data[1:])


def env_url():
    envs = {
        "torchrun": "RANK=1\nWORLD_SIZE=4\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\n"
        "MASTER_ADDR=10.0.0.1\nMASTER_PORT=29500\nTORCHELASTIC_RUN_ID=job7\n",
        "weft_url_v6": "WEFT_RANK=0\nWEFT_WORLD_SIZE=2\nWEFT_INIT_URL=tcp://[::1]:29500\n"
        "WEFT_JOB_ID=abc\n",
        "weft_url_host": "WEFT_RANK=3\nWEFT_WORLD_SIZE=8\nWEFT_LOCAL_RANK=3\n"
        "WEFT_LOCAL_WORLD_SIZE=4\nWEFT_INIT_URL=tcp://node-1.cluster:1234\n",
        "ompi": "OMPI_COMM_WORLD_RANK=2\nOMPI_COMM_WORLD_SIZE=3\nOMPI_COMM_WORLD_LOCAL_RANK=0\n"
        "OMPI_COMM_WORLD_LOCAL_SIZE=1\nWEFT_MASTER_ADDR=[fe80::1]\nWEFT_MASTER_PORT=5000\n"
        "OMPI_MCA_ess_base_jobid=42\n",
        "slurm": "SLURM_PROCID=5\nSLURM_NTASKS=6\nSLURM_LOCALID=1\nSLURM_NTASKS_PER_NODE=2(x3)\n"
        "MASTER_ADDR=host\nMASTER_PORT=1\nSLURM_JOB_ID=99\n",
        "host_port_typo": "RANK=0\nWORLD_SIZE=1\nMASTER_ADDR=host:29500\nMASTER_PORT=29500\n",
        "half_set": "RANK=0\nMASTER_ADDR=h\n",
        "bad_numbers": "RANK=-1\nWORLD_SIZE=99999999999\nMASTER_PORT=70000\nMASTER_ADDR=h\n",
        "bad_urls": "RANK=0\nWORLD_SIZE=1\nWEFT_INIT_URL=http://x:1\nX=tcp://[::1\n"
        "Y=tcp://a:b\nZ=[::1]:80\n",
    }
    for name, text in envs.items():
        write("env_url", name, text.encode())


def tcp_wire():
    def view(nranks, rank, nlanes, comm):
        return bytes([nranks - 1, rank, nlanes - 1, 0]) + struct.pack("<I", comm)

    def hello(comm, frm, to, lane, nlanes, magic=0x57454654, version=1):
        return struct.pack("<IIQiiii", magic, version, comm, frm, to, lane, nlanes)

    def ack(status):
        return struct.pack("<Ii", 0x57454654, status)

    write("tcp_wire", "ok", view(4, 2, 2, 77) + hello(77, 1, 2, 1, 2) + ack(0))
    write("tcp_wire", "other_comm", view(4, 2, 2, 77) + hello(78, 1, 2, 1, 2) + ack(3))
    write("tcp_wire", "bad_rank", view(4, 1, 1, 5) + hello(5, 3, 1, 0, 1) + ack(4))
    write("tcp_wire", "bad_lanes", view(8, 7, 4, 5) + hello(5, 0, 7, 4, 4) + ack(5))
    write("tcp_wire", "version", view(2, 1, 1, 5) + hello(5, 0, 1, 0, 1, version=2) + ack(2))


def call_desc():
    # Magic "WFCD", kind, dtype, op (u32), seq, count (u64), root, algo (i32): 40 bytes, host
    # order. The target's input is this rank's description, then the one that came.
    def desc(kind, dtype, op, seq, count, root, algo):
        return struct.pack("<IIIIQQii", 0x57464344, kind, dtype, op, seq, count, root, algo)

    same = desc(0, 7, 0, 1, 1024, -1, 1)
    write("call_desc", "same", same + same)
    write("call_desc", "other_count", same + desc(0, 7, 0, 1, 1000, -1, 1))
    write("call_desc", "send_recv", desc(7, 0, 0, 3, 16, 1, 0) + desc(6, 0, 0, 3, 16, 2, 0))
    write("call_desc", "garbage", same + b"previous collective's bytes, not a desc")
    write("call_desc", "out_of_range", same + desc(99, 99, 99, 1, 2**63, -5, 77))


def tune_file():
    write("tune_file", "weft_bench", b"alpha 2.5e-05\nbeta 6.1e-10\ngamma 2.2e-10\n")
    write("tune_file", "missing_gamma", b"alpha 1e-6\nbeta 1e-9\n")
    write("tune_file", "negative", b"alpha -1\nbeta 1e-9\ngamma 1e-9\n")
    write("tune_file", "not_numbers", b"alpha fast\nbeta 1e-9\ngamma 1e-9\n")
    write("tune_file", "single_constants", b"shm.intra.beta 2.5e-10\nrdma.inter.alpha 3e-6\n")
    write("tune_file", "bad_constant", b"ib.intra.alpha 1e-6\n")


def boot_record():
    # host_id[160], then 4 blobs of 144 bytes; blob 0 is a net_addr_t (sockaddr_storage of 128
    # bytes, then its socklen_t length).
    def record(host, tcp=b""):
        blobs = tcp.ljust(144, b"\0") + bytes(3 * 144)
        return host.ljust(160, b"\0") + blobs

    v4 = struct.pack("<H", 2) + struct.pack(">H", 29500) + bytes([10, 0, 0, 7])
    v6 = struct.pack("<H", 10) + struct.pack(">H", 40000) + bytes(4) + bytes(15) + b"\x01" + bytes(4)
    write("boot_record", "ipv4", record(b"node1/6d1c-boot/4026531840",
                                        v4.ljust(128, b"\0") + struct.pack("<I", 16)))
    write("boot_record", "ipv6", record(b"node2/77aa-boot/4026531841",
                                        v6.ljust(128, b"\0") + struct.pack("<I", 28)))
    write("boot_record", "no_tcp", record(b"node3/boot/1"))


if __name__ == "__main__":
    boot_record()
    store()
    env_url()
    tcp_wire()
    call_desc()
    tune_file()

// rank_body.h -- what one rank of a multi-process collective test does.
#ifndef WEFT_TESTS_COLLECTIVES_MP_RANK_BODY_H_
#define WEFT_TESTS_COLLECTIVES_MP_RANK_BODY_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "include/weft.h"
}

// Joins a communicator of nranks on 127.0.0.1:port; "" or the error, with the rank.
std::string join(int rank, int nranks, int port, weft_comm_t** comm);

// All-reduce of `count` elements for one dtype and op, in place or not, checked exactly against
// patterns.h. Returns "" or a message naming the case and the first wrong element.
std::string check_all_reduce(weft_comm_t* comm, weft_dtype_t d, weft_op_t op, size_t count,
                             bool in_place);

// Broadcast of `count` elements from root, checked exactly.
std::string check_broadcast(weft_comm_t* comm, weft_dtype_t d, int root, size_t count,
                            bool in_place);



// Runs a call whose buffers lie inside `regions` (host memory, filled with the inputs); on
// return the regions must hold what the call wrote. The default runs weft_call(call, comm,
// NULL); device tests mirror the regions in device memory around a call on a stream.
using Region = std::pair<char*, size_t>;
using CallRunner =
    std::function<weft_result_t(weft_comm_t* comm, weft_call_t call, std::vector<Region> regions)>;

// Any collective through weft_call with a forced algorithm, checked exactly (patterns.h):
// all_reduce, reduce (root checked), broadcast, all_gather and reduce_scatter (NCCL's in-place
// layouts when in_place), gather (root checked; the others pass no recvbuf) and scatter (the
// others pass no sendbuf), in place on the root as all_gather and reduce_scatter, all_to_all
// (no in-place form: in_place is ignored), barrier.
std::string check_call(weft_comm_t* comm, weft_coll_t coll, weft_algo_t algo, weft_dtype_t d,
                       weft_op_t op, size_t count, bool in_place, int root,
                       const CallRunner* runner = nullptr);
#endif  // WEFT_TESTS_COLLECTIVES_MP_RANK_BODY_H_

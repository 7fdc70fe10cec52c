// make_data.cc -- writes tests/msccl/data/*.xml from programs.h (the files the docs and
// weft_sim_algo_file_test.sh use): bazel run //tests/msccl:make_data -- tests/msccl/data
#include <fstream>
#include <string>

#include "tests/msccl/programs.h"

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  using namespace msccl_test;
  std::ofstream(dir + "/ring_allreduce_4x2.xml") << ring_all_reduce(4, 2).xml();
  std::ofstream(dir + "/allpairs_allreduce_4x2.xml") << all_pairs_all_reduce(4, 2).xml();
  std::ofstream(dir + "/direct_allgather_4x2.xml") << direct_all_gather(4, 2).xml();
  std::ofstream(dir + "/cross_channel_allgather_2.xml") << cross_channel_all_gather().xml();
  return 0;
}

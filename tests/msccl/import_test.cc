// import_test.cc -- MSCCL programs into schedules without processes: the XML reader, every
// malformed-file error (naming line and element), the per-peer stream order the reference
// execution picks, schedules that validate for every rank, and devcompile's refusal.
#include <gtest/gtest.h>
#include <string.h>

#include <string>

#include "tests/msccl/programs.h"

extern "C" {
#include "collectives/devcompile.h"
#include "collectives/msccl_import.h"
#include "collectives/xml_reader.h"
#include "common/error.h"
}

namespace {

using msccl_test::Program;

std::string Parse(const std::string& xml, msccl_program_t** out = nullptr) {
  msccl_program_t* p = nullptr;
  weft_result_t r = msccl_parse(xml.data(), xml.size(), "t.xml", &p);
  if (out)
    *out = p;
  else
    msccl_free(p);
  return r == WEFT_SUCCESS ? "" : err_last();
}

sched_args_t Args(weft_coll_t coll, int rank, int n, size_t count, bool in_place) {
  sched_args_t a;
  memset(&a, 0, sizeof a);
  a.coll = coll;
  a.rank = rank;
  a.nranks = n;
  a.count = count;
  a.in_place = in_place;
  return a;
}

TEST(XmlReader, TagsAttributesCommentsLines) {
  const char* text =
      "<?xml version=\"1.0\"?>\n<!-- a <comment> -->\n<a x='1' y=\"&lt;&amp;&#65;\">\n"
      "  <b/>\n  <c z=\"2\">text</c>\n</a>\n";
  xml_doc_t d;
  ASSERT_EQ(xml_parse(text, strlen(text), "t", &d), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(d.nelems, 3);
  EXPECT_STREQ(xml_name(&d, 0), "a");
  EXPECT_EQ(d.elems[0].line, 3);
  EXPECT_STREQ(xml_attr(&d, 0, "x"), "1");
  EXPECT_STREQ(xml_attr(&d, 0, "y"), "<&A");
  EXPECT_EQ(xml_attr(&d, 0, "q"), nullptr);
  EXPECT_STREQ(xml_name(&d, 1), "b");
  EXPECT_EQ(d.elems[1].line, 4);
  EXPECT_EQ(d.elems[2].line, 5);
  EXPECT_EQ(d.elems[0].first_child, 1);
  EXPECT_EQ(d.elems[1].next_sibling, 2);
  xml_free(&d);
}

TEST(XmlReader, RefusesBrokenDocumentsNamingTheLine) {
  struct {
    const char* text;
    const char* expect;
  } cases[] = {
      {"<a>\n<b>\n</a>", "t:3: <b> (line 2) is closed by </a>"},
      {"<a>\n<b/>\n", "<a> (line 1) is never closed"},
      {"<a x=1/>", "attribute value must be quoted"},
      {"<a x='1' x='2'/>", "attribute appears twice"},
      {"<a/><b/>", "a second root element"},
      {"<!-- open", "comment not closed"},
      {"", "no element"},
      {"<a x='&bogus;'/>", "unknown entity"},
      {"<a\n x='1", "attribute value not closed"},
  };
  for (const auto& c : cases) {
    xml_doc_t d;
    EXPECT_NE(xml_parse(c.text, strlen(c.text), "t", &d), WEFT_SUCCESS) << c.text;
    EXPECT_NE(std::string(err_last()).find(c.expect), std::string::npos)
        << c.text << " -> " << err_last();
  }
  std::string deep;
  for (int i = 0; i < 100; i++) deep += "<a>";
  xml_doc_t d;
  EXPECT_NE(xml_parse(deep.data(), deep.size(), "t", &d), WEFT_SUCCESS);
  EXPECT_NE(std::string(err_last()).find("nested too deep"), std::string::npos);
}

// Every generated program loads, and every rank's schedule validates, in place and not.
TEST(MscclImport, GeneratedProgramsBuildForEveryRank) {
  struct {
    Program p;
    weft_coll_t coll;
    size_t count;
  } cases[] = {
      {msccl_test::ring_all_reduce(2, 1), WEFT_COLL_ALL_REDUCE, 6},
      {msccl_test::ring_all_reduce(5, 3), WEFT_COLL_ALL_REDUCE, 150},
      {msccl_test::all_pairs_all_reduce(4, 2), WEFT_COLL_ALL_REDUCE, 8},
      {msccl_test::direct_all_gather(3, 2), WEFT_COLL_ALL_GATHER, 4},
      {msccl_test::cross_channel_all_gather(), WEFT_COLL_ALL_GATHER, 2},
  };
  for (auto& c : cases) {
    msccl_program_t* p;
    ASSERT_EQ(Parse(c.p.xml(), &p), "") << c.p.name;
    int n = (int)c.p.gpus.size();
    EXPECT_EQ(msccl_ngpus(p), n);
    EXPECT_EQ(msccl_coll(p), c.coll);
    for (int r = 0; r < n; r++)
      for (bool in_place : {false, true}) {
        schedule_t s;
        sched_args_t a = Args(c.coll, r, n, c.count, in_place);
        ASSERT_EQ(msccl_build(p, &s, &a), WEFT_SUCCESS) << c.p.name << ": " << err_last();
        EXPECT_GT(s.nops, 0);
        sched_free(&s);
      }
    msccl_free(p);
  }
}

// Shapes msccl-tools emits: an in-place program's o_chunks="0" (the output is the input), nops
// with offsets -1 and cnt 0 that carry extra dependencies; and two of RCCL's bundled programs.
TEST(MscclImport, RealWorldShapes) {
  Program prog = msccl_test::all_pairs_all_reduce(3, 1);
  for (auto& g : prog.gpus) {
    g.o_chunks = 0;
    msccl_test::Step nop = msccl_test::S("nop", "i", -1, "o", -1, 0, 0, 1);
    g.tbs.back().steps.push_back(nop);
  }
  msccl_program_t* p;
  ASSERT_EQ(Parse(prog.xml(), &p), "");
  schedule_t s;
  sched_args_t a = Args(WEFT_COLL_ALL_REDUCE, 2, 3, 9, false);
  ASSERT_EQ(msccl_build(p, &s, &a), WEFT_SUCCESS) << err_last();
  sched_free(&s);
  msccl_free(p);
  for (const char* f :
       {"tests/msccl/data/alltoall-8n-0-9kb.xml", "tests/msccl/data/alltoall-8n-9kb-190kb.xml"}) {
    ASSERT_EQ(msccl_load(f, &p), WEFT_SUCCESS) << err_last();
    EXPECT_EQ(msccl_coll(p), WEFT_COLL_ALL_TO_ALL);
    EXPECT_EQ(msccl_ngpus(p), 8);
    for (int r = 0; r < 8; r++) {
      a = Args(WEFT_COLL_ALL_TO_ALL, r, 8, msccl_count_unit(p, 8) * 5, r % 2);
      ASSERT_EQ(msccl_build(p, &s, &a), WEFT_SUCCESS) << f << ": " << err_last();
      sched_free(&s);
    }
    msccl_free(p);
  }
}

// The stream order: rank 0's sends to rank 1 go channel 1 first, since its channel-0 message
// waits for rank 1's answer to the channel-1 one.
TEST(MscclImport, StreamOrderFollowsTheReferenceExecution) {
  msccl_program_t* p;
  ASSERT_EQ(Parse(msccl_test::cross_channel_all_gather().xml(), &p), "");
  schedule_t s;
  sched_args_t a = Args(WEFT_COLL_ALL_GATHER, 0, 2, 2, true);
  ASSERT_EQ(msccl_build(p, &s, &a), WEFT_SUCCESS) << err_last();
  std::vector<int> channels;
  for (int i = 0; i < s.nops; i++)
    if (s.ops[i].kind == SCHED_SEND) channels.push_back(s.ops[i].channel);
  EXPECT_EQ(channels, (std::vector<int>{1, 0}));
  sched_free(&s);
  msccl_free(p);
}

// A step that waits for its tb's previous step and for one on another tb has two dependencies;
// the all-pairs program's local reductions are SCHED_REDUCE ops.
TEST(MscclImport, SeveralDependenciesAndLocalReduce) {
  msccl_program_t* p;
  ASSERT_EQ(Parse(msccl_test::all_pairs_all_reduce(3, 2).xml(), &p), "");
  schedule_t s;
  sched_args_t a = Args(WEFT_COLL_ALL_REDUCE, 1, 3, 6, true);
  ASSERT_EQ(msccl_build(p, &s, &a), WEFT_SUCCESS) << err_last();
  int reduces = 0, multi = 0;
  for (int i = 0; i < s.nops; i++) {
    reduces += s.ops[i].kind == SCHED_REDUCE;
    multi += sched_ndeps(&s.ops[i]) > 1;
  }
  EXPECT_EQ(reduces, 2 * 2);  // (n - 1) peers x 2 channels
  EXPECT_GT(multi, 0);
  EXPECT_GT(s.buf_count[SCHED_SCRATCH], 0u);
  // The device loop has one dependency per step and no local reduction: refused, with why.
  dp_program_t prog;
  EXPECT_EQ(dp_compile(&s, WEFT_FLOAT32, WEFT_SUM, 3, 4096, &prog), WEFT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(err_last()).find("devcompile"), std::string::npos) << err_last();
  sched_free(&s);
  msccl_free(p);
}

TEST(MscclImport, CountsThatDoNotCutIntoChunksTakeTheNormalChoice) {
  msccl_program_t* p;
  ASSERT_EQ(Parse(msccl_test::ring_all_reduce(4, 2).xml(), &p), "");
  int use = -1;
  EXPECT_EQ(msccl_applies(p, WEFT_COLL_ALL_REDUCE, 4, 16, &use), WEFT_SUCCESS);
  EXPECT_EQ(use, 1);
  EXPECT_EQ(msccl_applies(p, WEFT_COLL_ALL_GATHER, 4, 16, &use), WEFT_SUCCESS);
  EXPECT_EQ(use, 0);  // another collective: the normal choice
  EXPECT_EQ(msccl_applies(p, WEFT_COLL_ALL_REDUCE, 4, 0, &use), WEFT_SUCCESS);
  EXPECT_EQ(use, 0);
  EXPECT_EQ(msccl_applies(p, WEFT_COLL_ALL_REDUCE, 4, 12, &use), WEFT_SUCCESS);
  EXPECT_EQ(use, 0);  // does not cut into 8 chunks: the normal choice
  EXPECT_EQ(msccl_count_unit(p, 4), 8u);
  EXPECT_EQ(msccl_applies(p, WEFT_COLL_ALL_REDUCE, 3, 16, &use), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("4 ranks (ngpus) but the communicator has 3"),
            std::string::npos)
      << err_last();
  msccl_free(p);
  // all_gather's unit: its per-rank count times n cuts into the output's n * i_chunks chunks, so
  // the input's i_chunks; all_to_all's input is n counts.
  ASSERT_EQ(Parse(msccl_test::direct_all_gather(4, 3).xml(), &p), "");
  EXPECT_EQ(msccl_count_unit(p, 4), 3u);
  msccl_free(p);
}

// Each malformed case is refused with a message naming the element and its line.
TEST(MscclImport, MalformedProgramsAreRefused) {
  auto ring = [] { return msccl_test::ring_all_reduce(3, 1); };
  struct Case {
    std::string name;
    std::string xml;
    std::string expect;
  };
  std::vector<Case> cases;
  {
    Program p = ring();
    p.gpus[1].tbs[0].steps.pop_back();  // rank 1 never takes rank 0's last message
    cases.push_back({"unmatched send", p.xml(), "(unmatched send)"});
  }
  {
    Program p = ring();
    p.gpus[0].tbs[0].steps[0].cnt = 2;
    p.gpus[0].i_chunks = p.gpus[0].o_chunks = 3;
    cases.push_back(
        {"sizes differ", p.xml(), "sends 2 chunks to gpu 1 on channel 0, but its receive there"});
  }
  {
    Program p = ring();
    p.gpus[0].tbs[0].steps[0].depid = 0;
    p.gpus[0].tbs[0].steps[0].deps = 2;
    cases.push_back({"cycle", p.xml(), "dependency cycle on gpu 0"});
  }
  {
    Program p = ring();
    p.gpus[2].tbs[0].steps[1].type = "rrx";
    cases.push_back({"unknown type", p.xml(), "unknown type \"rrx\""});
  }
  {
    Program p = ring();
    p.gpus[1].tbs[0].steps[0].srcoff = 3;
    cases.push_back(
        {"offset", p.xml(), "source chunks [3, 4) of buffer i lie outside its 3 chunks"});
  }
  {
    Program p = ring();
    p.gpus[0].tbs[0].steps[0].depid = 5;
    p.gpus[0].tbs[0].steps[0].deps = 0;
    cases.push_back({"bad reference", p.xml(), "names no step of gpu 0"});
  }
  {
    std::string x = ring().xml();
    x.replace(x.find("ngpus=\"3\""), 9, "ngpus=\"x3\"");
    cases.push_back({"bad attribute", x, "<algo>: attribute ngpus=\"x3\" is not an integer"});
  }
  {
    std::string x = ring().xml();
    x.replace(x.find("chan=\"0\""), 8, "chan=\"4\"");
    cases.push_back(
        {"channel out of range", x, "<tb>: attribute chan=\"4\" is not an integer in [0, 0]"});
  }
  {
    std::string x = ring().xml();
    x.replace(x.find(" coll=\"allreduce\""), 17, "");
    cases.push_back({"no coll", x, "<algo>: attribute coll is missing"});
  }
  {
    std::string x = ring().xml();
    x.replace(x.find("<gpu id=\"2\""), 11, "<gpu id=\"1\"");
    cases.push_back({"duplicate gpu", x, "<gpu>: id 1 was given already"});
  }
  {
    std::string x = ring().xml();
    x.replace(x.find("ngpus=\"3\""), 9, "ngpus=\"4\"");
    cases.push_back({"missing gpu", x, "there is no <gpu id=\"3\">"});
  }
  {
    std::string x = ring().xml();
    x.replace(x.find("<tb "), 4, "<tx ");
    x.replace(x.find("</tb>"), 5, "</tx>");
    cases.push_back({"unknown element", x, "<tx> inside <gpu>: unknown element"});
  }
  {
    std::string x = ring().xml();
    x.replace(x.find("</tb>"), 5, "</gpu>");
    cases.push_back({"xml", x, "<tb> (line 5) is closed by </gpu>"});
  }
  {
    // Rank 1 takes the channel-0 message only after the channel-1 one, which rank 0 sent later:
    // one ordered stream per peer cannot deliver that.
    Program p = msccl_test::cross_channel_all_gather();
    p.gpus[0].tbs[0].steps[0].depid = -1;
    p.gpus[0].tbs[0].steps[0].deps = -1;
    p.gpus[1].tbs[1].steps[0].depid = -1;
    p.gpus[1].tbs[1].steps[0].deps = -1;
    p.gpus[1].tbs[2].steps[0].depid = 0;
    p.gpus[1].tbs[2].steps[0].deps = 0;
    cases.push_back({"needs overtaking", p.xml(), "needs that message overtaken"});
  }
  for (const auto& c : cases) {
    std::string err = Parse(c.xml);
    EXPECT_NE(err, "") << c.name;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": " << err;
    EXPECT_NE(err.find("t.xml:"), std::string::npos) << c.name << ": " << err;
  }
}

// The schedule fields the importer needs: further dependencies (earlier ops only, counts as
// dep's), a local reduce with its ranges inside the buffers, and the list kept per op.
TEST(ScheduleFields, FurtherDependenciesAndLocalReduce) {
  schedule_t s;
  sched_init(&s, 8, 8);
  sched_op_t recv = {};
  recv.kind = SCHED_RECV_COPY;
  recv.peer = 1;
  recv.buf = SCHED_RECVBUF;
  recv.count = 4;
  recv.dep = -1;
  int a = sched_add(&s, &recv);
  recv.offset = 4;
  int b = sched_add(&s, &recv);
  sched_op_t red = {};
  red.kind = SCHED_REDUCE;
  red.peer = -1;
  red.buf = SCHED_RECVBUF;
  red.src_buf = SCHED_SENDBUF;
  red.count = 4;
  red.dep = -1;
  int c = sched_add(&s, &red);
  ASSERT_EQ(sched_add_dep(&s, c, a, 0), 0);
  ASSERT_EQ(sched_add_dep(&s, c, b, 1), 0);
  EXPECT_EQ(sched_ndeps(&s.ops[c]), 2);
  EXPECT_EQ(sched_dep_at(&s, &s.ops[c], 1).op, b);
  EXPECT_EQ(sched_validate(&s, 2), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(sched_kind_name(SCHED_REDUCE), "reduce");
  // Another op got a further dependency since: op c's list can no longer grow.
  sched_op_t d = red;
  int e = sched_add(&s, &d);
  ASSERT_EQ(sched_add_dep(&s, e, a, 0), 0);
  ASSERT_EQ(sched_add_dep(&s, e, b, 0), 0);
  EXPECT_EQ(sched_add_dep(&s, c, e, 0), -1);
  EXPECT_EQ(sched_validate(&s, 2), WEFT_SUCCESS) << err_last();
  // A further dependency on a later op.
  s.deps[s.ops[c].more_deps].op = e;
  EXPECT_EQ(sched_validate(&s, 2), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("depends on later op"), std::string::npos) << err_last();
  s.deps[s.ops[c].more_deps] = {b, 0};
  // Slice by slice needs the same count.
  s.ops[b].count = 3;
  EXPECT_EQ(sched_validate(&s, 2), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("has another count"), std::string::npos) << err_last();
  s.ops[b].count = 4;
  // The local reduce's operand inside its buffer.
  s.ops[c].src_offset = 6;
  EXPECT_EQ(sched_validate(&s, 2), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("source range outside"), std::string::npos) << err_last();
  sched_free(&s);
}

// Garbage of every sort fails cleanly (tests/fuzz runs the reader much longer).
TEST(MscclImport, ArbitraryBytesNeverCrash) {
  std::string base = msccl_test::all_pairs_all_reduce(3, 2).xml();
  unsigned seed = 12345;
  for (int i = 0; i < 2000; i++) {
    std::string x = base;
    int edits = 1 + (int)(seed % 4);
    for (int e = 0; e < edits; e++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = (seed >> 8) % x.size();
      seed = seed * 1103515245u + 12345u;
      x[at] = "<>/\"'=&!-0123456789 xa"[(seed >> 8) % 22];
    }
    x.resize((seed >> 4) % 7 == 0 ? (seed >> 12) % x.size() : x.size());
    Parse(x);
  }
}

}  // namespace

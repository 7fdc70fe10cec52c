// ibverbs_logic_test.cc -- the verbs transport's pure logic, on any machine: WEFT_IB_HCA parsing
// and matching (NCCL_IB_HCA's syntax), the GID a RoCE port uses, sysfs GID types, MTU sizes, and
// the facts comm.c reads from a peer's published blob.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <string.h>

#include <string>
#include <vector>

extern "C" {
#include "common/error.h"
#include "transport/ibv_wrap.h"
}

namespace {

ibvw_hca_list_t Parse(const char* spec) {
  ibvw_hca_list_t l;
  EXPECT_EQ(ibvw_hca_parse(spec, &l), WEFT_SUCCESS) << spec << ": " << err_last();
  return l;
}

TEST(IbHca, EmptyAllowsEverything) {
  for (const char* spec : {"", ",", ",,"}) {
    ibvw_hca_list_t l = Parse(spec);
    EXPECT_EQ(l.n, 0) << spec;
    EXPECT_TRUE(ibvw_hca_match(&l, "mlx5_0", 1));
    EXPECT_TRUE(ibvw_hca_match(&l, "rxe0", 2));
  }
  ibvw_hca_list_t l;
  ASSERT_EQ(ibvw_hca_parse(nullptr, &l), WEFT_SUCCESS);
  EXPECT_TRUE(ibvw_hca_match(&l, "anything", 1));
}

TEST(IbHca, PrefixesAndPorts) {
  ibvw_hca_list_t l = Parse("mlx5_1:2,rxe");
  ASSERT_EQ(l.n, 2);
  EXPECT_FALSE(l.exclude);
  EXPECT_FALSE(l.exact);
  EXPECT_STREQ(l.e[0].name, "mlx5_1");
  EXPECT_EQ(l.e[0].port, 2);
  EXPECT_STREQ(l.e[1].name, "rxe");
  EXPECT_EQ(l.e[1].port, 0);
  EXPECT_TRUE(ibvw_hca_match(&l, "mlx5_1", 2));
  EXPECT_FALSE(ibvw_hca_match(&l, "mlx5_1", 1));  // the wrong port
  EXPECT_TRUE(ibvw_hca_match(&l, "mlx5_10", 2));  // a prefix, as NCCL_IB_HCA
  EXPECT_FALSE(ibvw_hca_match(&l, "mlx5_0", 2));
  EXPECT_TRUE(ibvw_hca_match(&l, "rxe0", 1));
  EXPECT_TRUE(ibvw_hca_match(&l, "rxe1", 7));
  EXPECT_FALSE(ibvw_hca_match(&l, "siw0", 1));
}

TEST(IbHca, ExactNames) {
  ibvw_hca_list_t l = Parse("=mlx5_1,rxe0:1");
  EXPECT_TRUE(l.exact);
  EXPECT_TRUE(ibvw_hca_match(&l, "mlx5_1", 1));
  EXPECT_TRUE(ibvw_hca_match(&l, "mlx5_1", 2));
  EXPECT_FALSE(ibvw_hca_match(&l, "mlx5_10", 1));
  EXPECT_TRUE(ibvw_hca_match(&l, "rxe0", 1));
  EXPECT_FALSE(ibvw_hca_match(&l, "rxe0", 2));
  EXPECT_FALSE(ibvw_hca_match(&l, "rxe", 1));
}

TEST(IbHca, Exclude) {
  ibvw_hca_list_t l = Parse("^mlx5_0,rxe0:2");
  EXPECT_TRUE(l.exclude);
  EXPECT_FALSE(ibvw_hca_match(&l, "mlx5_0", 1));
  EXPECT_FALSE(ibvw_hca_match(&l, "mlx5_01", 1));  // prefix
  EXPECT_TRUE(ibvw_hca_match(&l, "mlx5_1", 1));
  EXPECT_TRUE(ibvw_hca_match(&l, "rxe0", 1));  // only port 2 is left out
  EXPECT_FALSE(ibvw_hca_match(&l, "rxe0", 2));

  ibvw_hca_list_t x = Parse("^=mlx5_0");
  EXPECT_TRUE(x.exclude);
  EXPECT_TRUE(x.exact);
  EXPECT_FALSE(ibvw_hca_match(&x, "mlx5_0", 1));
  EXPECT_TRUE(ibvw_hca_match(&x, "mlx5_01", 1));
}

TEST(IbHca, BadSpecsNameTheKnob) {
  for (const char* spec :
       {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", ":1", "a:1:2", "mlx5_0:1x"}) {
    ibvw_hca_list_t l;
    EXPECT_EQ(ibvw_hca_parse(spec, &l), WEFT_ERR_INVALID_ARGUMENT) << spec;
    EXPECT_NE(std::string(err_last()).find("WEFT_IB_HCA"), std::string::npos) << err_last();
  }
  std::string many;
  for (int i = 0; i <= IBVW_HCA_MAX; i++) many += "d" + std::to_string(i) + ",";
  ibvw_hca_list_t l;
  EXPECT_EQ(ibvw_hca_parse(many.c_str(), &l), WEFT_ERR_INVALID_ARGUMENT);
  std::string long_name(IBVW_NAME_MAX, 'x');
  EXPECT_EQ(ibvw_hca_parse(long_name.c_str(), &l), WEFT_ERR_INVALID_ARGUMENT);
}

ibvw_gid_t Gid(int index, int type, const char* text) {
  ibvw_gid_t g;
  g.index = index;
  g.type = type;
  EXPECT_EQ(inet_pton(AF_INET6, text, g.gid), 1) << text;
  return g;
}

uint32_t V4(const char* text) {
  in_addr a;
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1);
  return a.s_addr;
}

// A typical RoCE table: link-local v1 and v2, then v1 and v2 of each IPv4 address.
std::vector<ibvw_gid_t> Table() {
  return {Gid(0, IBVW_GID_IB_ROCE_V1, "fe80::5054:ff:fe12:3456"),
          Gid(1, IBVW_GID_ROCE_V2, "fe80::5054:ff:fe12:3456"),
          Gid(2, IBVW_GID_IB_ROCE_V1, "::ffff:10.0.0.5"),
          Gid(3, IBVW_GID_ROCE_V2, "::ffff:10.0.0.5"),
          Gid(4, IBVW_GID_IB_ROCE_V1, "::ffff:192.168.7.2"),
          Gid(5, IBVW_GID_ROCE_V2, "::ffff:192.168.7.2")};
}

TEST(IbGid, RoceV2OfTheAdvertisedAddress) {
  auto t = Table();
  EXPECT_EQ(ibvw_gid_pick(t.data(), static_cast<int>(t.size()), V4("192.168.7.2"), -1), 5);
  EXPECT_EQ(ibvw_gid_pick(t.data(), static_cast<int>(t.size()), V4("10.0.0.5"), -1), 3);
}

TEST(IbGid, ElseAnyRoceV2OfAnIpv4Address) {
  auto t = Table();
  // Loopback, or an address the device does not carry: the first v2 IPv4 GID.
  EXPECT_EQ(ibvw_gid_pick(t.data(), static_cast<int>(t.size()), V4("127.0.0.1"), -1), 3);
  EXPECT_EQ(ibvw_gid_pick(t.data(), static_cast<int>(t.size()), 0, -1), 3);
}

TEST(IbGid, ElseAnyRoceV2ElseTheFirst) {
  std::vector<ibvw_gid_t> v6 = {Gid(0, IBVW_GID_IB_ROCE_V1, "fe80::1"),
                                Gid(1, IBVW_GID_ROCE_V2, "fe80::1"),
                                Gid(2, IBVW_GID_ROCE_V2, "2001:db8::1")};
  EXPECT_EQ(ibvw_gid_pick(v6.data(), 3, V4("10.0.0.5"), -1), 1);
  std::vector<ibvw_gid_t> v1 = {Gid(4, IBVW_GID_IB_ROCE_V1, "fe80::1"),
                                Gid(6, IBVW_GID_IB_ROCE_V1, "::ffff:10.0.0.5")};
  EXPECT_EQ(ibvw_gid_pick(v1.data(), 2, V4("10.0.0.5"), -1), 4);
  EXPECT_EQ(ibvw_gid_pick(nullptr, 0, V4("10.0.0.5"), -1), -1);
}

TEST(IbGid, ForcedIndex) {
  auto t = Table();
  EXPECT_EQ(ibvw_gid_pick(t.data(), static_cast<int>(t.size()), V4("192.168.7.2"), 2), 2);
  EXPECT_EQ(ibvw_gid_pick(t.data(), static_cast<int>(t.size()), V4("192.168.7.2"), 0), 0);
  EXPECT_EQ(ibvw_gid_pick(t.data(), static_cast<int>(t.size()), 0, 9), -1);  // not valid there
}

TEST(IbGid, SysfsTypes) {
  EXPECT_EQ(ibvw_gid_type_parse("RoCE v2\n"), IBVW_GID_ROCE_V2);
  EXPECT_EQ(ibvw_gid_type_parse("RoCE v2"), IBVW_GID_ROCE_V2);
  EXPECT_EQ(ibvw_gid_type_parse("IB/RoCE v1\n"), IBVW_GID_IB_ROCE_V1);
  EXPECT_EQ(ibvw_gid_type_parse(""), IBVW_GID_IB_ROCE_V1);
}

TEST(IbMtu, Bytes) {
  EXPECT_EQ(ibvw_mtu_bytes(1), 256);
  EXPECT_EQ(ibvw_mtu_bytes(3), 1024);
  EXPECT_EQ(ibvw_mtu_bytes(5), 4096);
  EXPECT_EQ(ibvw_mtu_bytes(0), 0);
  EXPECT_EQ(ibvw_mtu_bytes(6), 0);
}

TEST(IbBlob, AllZerosIsNoPort) {
  std::vector<unsigned char> blob(ibverbs_transport_ops.addr_size, 0);
  ibvw_port_facts_t f = ibverbs_blob_facts(blob.data());
  EXPECT_FALSE(f.present);
  EXPECT_EQ(f.link_layer, 0);
  // The blob fits a bootstrap record's slot (bootstrap/rendezvous.h).
  EXPECT_LE(ibverbs_transport_ops.addr_size, 144u);
}

}  // namespace

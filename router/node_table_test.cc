// The node table's admission and discovery without live nodes: DNS names expand to one node per
// address, and nodes that do not answer are down, never healthy.
#include "router/node_table.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

TEST(NodeTableTest, DnsNamesExpandToNodesAndSilentNodesAreDown) {
  NodeTableOptions o;
  o.poll_deadline = std::chrono::milliseconds(200);
  NodeClient client(std::make_shared<ChannelSet>(), "fp");
  NodeTable t(&client, o);
  t.Add(NodeRole::kDecoder, "dns:///localhost:1");
  t.Add(NodeRole::kEncoder, "127.0.0.1:2");
  t.PollAll();
  bool expanded = false;
  for (const NodeView& n : t.All()) {
    EXPECT_EQ(n.state, NodeState::kDown) << n.address;
    if (n.role == NodeRole::kDecoder && (n.address == "127.0.0.1:1" || n.address == "[::1]:1")) expanded = true;
  }
  EXPECT_TRUE(expanded);
  EXPECT_TRUE(t.Healthy(NodeRole::kDecoder).empty());
  EXPECT_EQ(t.Register(NodeRole::kEncoder, "dns:///x:1").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Register(NodeRole::kEncoder, "127.0.0.1:3").code(), StatusCode::kUnavailable);
}

// Each change of a node's state is told once, with the state before: a silent node goes from
// pending to down at its first poll, and later polls or a MarkDown of a down node say nothing.
TEST(NodeTableTest, StateChangesAreToldOnce) {
  std::vector<std::string> told;
  NodeTableOptions o;
  o.poll_deadline = std::chrono::milliseconds(200);
  o.on_change = [&](const NodeView& now, NodeState before) {
    told.push_back(now.address + " " + NodeStateName(before) + "->" + NodeStateName(now.state) +
                   (now.error.empty() ? "" : " (error)"));
  };
  NodeClient client(std::make_shared<ChannelSet>(), "fp");
  NodeTable t(&client, o);
  t.Add(NodeRole::kDecoder, "127.0.0.1:1");
  t.PollAll();
  t.PollAll();
  t.MarkDown("127.0.0.1:1", "stream reset");
  EXPECT_EQ(told, (std::vector<std::string>{"127.0.0.1:1 pending->down (error)"}));
}

// A DNS name that stops listing an address: the node goes once it is down; a failed lookup
// removes nothing, and a node also named explicitly stays.
TEST(NodeTableTest, NodesDnsNoLongerListsLeaveOnceDown) {
  std::vector<std::string> listed = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
  bool fail = false;
  NodeTableOptions o;
  o.poll_deadline = std::chrono::milliseconds(200);
  o.resolver = [&](const std::string& host, const std::string& port) -> StatusOr<std::vector<std::string>> {
    EXPECT_EQ(host, "decoders.example");
    EXPECT_EQ(port, "7000");
    if (fail) return UnavailableError("no DNS");
    return listed;
  };
  NodeClient client(std::make_shared<ChannelSet>(), "fp");
  NodeTable t(&client, o);
  t.Add(NodeRole::kDecoder, "dns:///decoders.example:7000");
  auto addresses = [&] {
    std::vector<std::string> out;
    for (const NodeView& n : t.All()) out.push_back(n.address);
    return out;
  };
  t.PollAll();
  EXPECT_EQ(addresses(), listed);
  t.Add(NodeRole::kDecoder, "127.0.0.1:3");  // also named explicitly
  listed = {"127.0.0.1:1"};
  fail = true;
  t.PollAll();
  EXPECT_EQ(addresses().size(), 3u);  // a failed lookup removes nothing
  fail = false;
  t.PollAll();  // :2 is unlisted and down (nothing listens there): gone; :3 stays
  EXPECT_EQ(addresses(), (std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:3"}));
}

}  // namespace
}  // namespace ds41

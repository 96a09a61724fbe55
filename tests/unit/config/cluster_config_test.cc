// [cluster]: what a file can get wrong is reported when it is loaded, with
// file:line:col and the key. Columns are counted by hand from the text.
#include <gtest/gtest.h>

#include <set>

#include "core/config/config.h"

namespace weft::config {
namespace {

Expected<Config> Parse(std::string_view text) { return ParseConfig(text, "c.toml", "/etc/weft"); }

std::string ErrorOf(std::string_view text) {
  auto config = Parse(text);
  EXPECT_FALSE(config.ok()) << "expected an error for:\n" << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
  return config.status().message();
}

TEST(ClusterConfig, AbsentSectionIsASingleProcess) {
  auto config = Parse("[runtime]\ninter_op_threads = 2\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->cluster.has_value());
}

TEST(ClusterConfig, ReadsEveryStaticKeyWithJobsInFileOrder) {
  auto config = Parse(R"([cluster]
transport = "tcp"
connect_timeout_ms = 5000
rpc_timeout_ms = 30000
job = "worker"
task = 1
[cluster.jobs]
worker = ["127.0.0.1:7071", "Node-02.example:7072"]
ps = ["[::1]:7070"]
[cluster.transports]
ps = "zmq"
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_TRUE(config->cluster.has_value());
  const ClusterConfig& cluster = *config->cluster;
  EXPECT_EQ(cluster.transport, "tcp");
  EXPECT_EQ(cluster.connect_timeout_ms, 5000);
  EXPECT_EQ(cluster.rpc_timeout_ms, 30000);
  EXPECT_EQ(cluster.job, "worker");
  EXPECT_EQ(cluster.task, 1);
  EXPECT_EQ(cluster.membership, Membership::kStatic);
  // The order of the file, not the alphabet.
  ASSERT_EQ(cluster.jobs.size(), 2u);
  EXPECT_EQ(cluster.jobs[0].name, "worker");
  EXPECT_EQ(cluster.jobs[1].name, "ps");
  ASSERT_EQ(cluster.jobs[0].addresses.size(), 2u);
  EXPECT_EQ(cluster.jobs[0].addresses[0].host, "127.0.0.1");
  EXPECT_EQ(cluster.jobs[0].addresses[0].port, 7071);
  EXPECT_EQ(cluster.jobs[0].addresses[1].ToString(), "node-02.example:7072");
  EXPECT_EQ(cluster.jobs[0].address_pos[1].ToString(), "c.toml:8:29");
  EXPECT_EQ(cluster.jobs[1].addresses[0].host, "::1");
  EXPECT_EQ(cluster.jobs[1].addresses[0].ToString(), "[::1]:7070");
  EXPECT_EQ(cluster.TransportOf(cluster.jobs[0]), "tcp");
  EXPECT_EQ(cluster.TransportOf(cluster.jobs[1]), "zmq");
  EXPECT_EQ(cluster.jobs[1].transport_pos.ToString(), "c.toml:11:6");
  EXPECT_EQ(config->written_sections, std::vector<std::string>{"cluster"});
}

TEST(ClusterConfig, DefaultsOfAStaticCluster) {
  auto config = Parse("[cluster.jobs]\nps = [\"a:1\"]\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ClusterConfig& cluster = *config->cluster;
  EXPECT_EQ(cluster.transport, "tcp");
  EXPECT_EQ(cluster.connect_timeout_ms, 10000);
  EXPECT_EQ(cluster.rpc_timeout_ms, 60000);
  EXPECT_EQ(cluster.job, "");
  EXPECT_FALSE(cluster.task.has_value());
  EXPECT_EQ(cluster.base_port, 7070);
  EXPECT_EQ(cluster.mpi_host, "127.0.0.1");
}

TEST(ClusterConfig, ShippedLocalClusterLoads) {
  auto config = LoadConfigFile(WEFT_SOURCE_DIR "/configs/cluster_local.toml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_TRUE(config->cluster.has_value());
  ASSERT_EQ(config->cluster->jobs.size(), 2u);
  EXPECT_EQ(config->cluster->jobs[0].name, "ps");
  EXPECT_EQ(config->cluster->jobs[0].addresses.size(), 1u);
  EXPECT_EQ(config->cluster->jobs[1].name, "worker");
  EXPECT_EQ(config->cluster->jobs[1].addresses.size(), 2u);
}

// --- Addresses ---------------------------------------------------------------------------------

TEST(ClusterConfig, DuplicateAddressNamesBothPlaces) {
  EXPECT_EQ(ErrorOf("[cluster]\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n"
                    "worker = [\"127.0.0.1:7071\", \"127.0.0.1:7070\"]\n"),
            "c.toml:4:29: cluster.jobs.worker[1]: address \"127.0.0.1:7070\" is also used by job 'ps' task 0 at "
            "c.toml:3:7; give every task its own host:port");
  // Written differently, the same address.
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [\"Node1:7070\", \"node1:7070\"]\n"),
            "c.toml:2:21: cluster.jobs.ps[1]: address \"node1:7070\" is also used by job 'ps' task 0 at "
            "c.toml:2:7; give every task its own host:port");
}

TEST(ClusterConfig, MalformedAddressSaysWhatIsWrong) {
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [\"127.0.0.1\"]\n"),
            "c.toml:2:7: cluster.jobs.ps[0]: expected host:port, got \"127.0.0.1\": it has no port (write "
            "host:port, e.g. \"127.0.0.1:7070\")");
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [\"a:1\", \"10.0.0.256:7070\"]\n"),
            "c.toml:2:14: cluster.jobs.ps[1]: expected host:port, got \"10.0.0.256:7070\": \"10.0.0.256\" is not an "
            "IPv4 address (four numbers 0..255 joined by '.')");
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [7070]\n"),
            "c.toml:2:7: cluster.jobs.ps[0]: expected a \"host:port\" string, got 7070");
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = \"a:1\"\n"),
            "c.toml:2:6: cluster.jobs.ps: expected an array of \"host:port\" strings, one per task, got \"a:1\"");
}

struct AddressCase {
  const char* text;
  const char* error;
};

TEST(ClusterConfig, HostPortErrors) {
  const AddressCase cases[] = {
      {"", "it is empty"},
      {"127.0.0.1", "it has no port (write host:port, e.g. \"127.0.0.1:7070\")"},
      {"127.0.0.1:", "the port is empty"},
      {"127.0.0.1:0", "the port 0 is out of range 1..65535"},
      {"127.0.0.1:65536", "the port 65536 is out of range 1..65535"},
      {"127.0.0.1:9999999", "the port 9999999 is out of range 1..65535"},
      {"127.0.0.1:http", "the port \"http\" is not a number"},
      {"127.0.0.1:-1", "the port \"-1\" is not a number"},
      {":7070", "the host is empty"},
      {"::1:7070", "an IPv6 address needs brackets, as in \"[::1]:7070\""},
      {"a:b:7070", "it has more than one ':'"},
      {"[::1:7070", "'[' has no matching ']'"},
      {"[::1]", "it has no port (write host:port, e.g. \"[::1]:7070\")"},
      {"[::1]7070", "expected ':' and a port after ']'"},
      {"[fe80::zz]:7070", "\"fe80::zz\" is not an IPv6 address"},
      {"[node1]:7070", "\"node1\" is not an IPv6 address"},
      {"10.0.0:7070", "\"10.0.0\" is not an IPv4 address (four numbers 0..255 joined by '.')"},
      {"my host:7070", "\"my host\" is not a hostname (letters, digits, '-' and '_', in labels joined by '.')"},
      {"-node:7070", "\"-node\" is not a hostname (letters, digits, '-' and '_', in labels joined by '.')"},
      {"a..b:7070", "\"a..b\" is not a hostname (letters, digits, '-' and '_', in labels joined by '.')"},
      {"tcp://10.0.0.1:7070",
       "write host:port without a scheme; the transport comes from cluster.transport or [cluster.transports]"},
  };
  for (const AddressCase& c : cases) {
    auto parsed = ParseHostPort(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().message(), c.error) << c.text;
  }
}

TEST(ClusterConfig, HostPortAccepts) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1:7070", "127.0.0.1:7070"},
      {"localhost:1", "localhost:1"},
      {"a:65535", "a:65535"},
      {"Node01.Cluster:7070", "node01.cluster:7070"},
      {"rack0_blade1:80", "rack0_blade1:80"},
      {"[::1]:7070", "[::1]:7070"},
      {"[2001:DB8::5]:9", "[2001:db8::5]:9"},
      {"[fe80::1%eth0]:7070", "[fe80::1%eth0]:7070"},
  };
  for (const auto& [text, canonical] : cases) {
    auto parsed = ParseHostPort(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->ToString(), canonical);
  }
  auto parsed = ParseHostPort("[::1]:7070");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->host, "::1");
  EXPECT_EQ(parsed->port, 7070);
}

// --- Jobs --------------------------------------------------------------------------------------

TEST(ClusterConfig, JobNamesAreSnakeCase) {
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nParamServer = [\"a:1\"]\n"),
            "c.toml:2:1: cluster.jobs.ParamServer: job names are lower_snake_case (letters, digits and '_', "
            "starting with a letter), as in /job:<name>");
  EXPECT_EQ(ErrorOf("[cluster.tasks]\n2ps = 1\n[cluster]\nmembership = \"mpi\"\n"),
            "c.toml:2:1: cluster.tasks.2ps: job names are lower_snake_case (letters, digits and '_', "
            "starting with a letter), as in /job:<name>");
}

TEST(ClusterConfig, EmptyJob) {
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [\"a:1\"]\nworker = []\n"),
            "c.toml:3:10: cluster.jobs.worker: job 'worker' has no tasks; give the \"host:port\" of at least "
            "one, or remove it");
}

TEST(ClusterConfig, StaticNeedsJobs) {
  EXPECT_EQ(ErrorOf("[cluster]\ntransport = \"tcp\"\n"),
            "c.toml:1:1: cluster: membership = \"static\" (the default) needs [cluster.jobs] with the "
            "\"host:port\" of every task, e.g. ps = [\"127.0.0.1:7070\"] and worker = [\"127.0.0.1:7071\"]");
  EXPECT_EQ(ErrorOf("[cluster]\njobs = 3\n"),
            "c.toml:2:8: cluster.jobs: expected a table [cluster.jobs] of job = ...; got 3");
}

TEST(ClusterConfig, SectionThatIsNotATable) {
  EXPECT_EQ(ErrorOf("cluster = 3\n"), "c.toml:1:11: cluster: expected a table [cluster], got 3");
}

TEST(ClusterConfig, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(ErrorOf("[cluster]\ntransprot = \"tcp\"\n[cluster.jobs]\nps = [\"a:1\"]\n"),
            "c.toml:2:1: cluster.transprot: unknown key; did you mean 'transport'?");
}

// --- Transports --------------------------------------------------------------------------------

TEST(ClusterConfig, TransportMustBeAScheme) {
  EXPECT_EQ(ErrorOf("[cluster]\ntransport = \"TCP\"\n[cluster.jobs]\nps = [\"a:1\"]\n"),
            "c.toml:2:13: cluster.transport: expected a transport scheme such as \"tcp\", \"zmq\" or \"rdma\" "
            "(lower-case letters, digits, '+', '-' and '.'), got \"TCP\"; did you mean \"tcp\"?");
  EXPECT_EQ(ErrorOf("[cluster]\ntransport = 3\n[cluster.jobs]\nps = [\"a:1\"]\n"),
            "c.toml:2:13: cluster.transport: expected a string, got 3");
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [\"a:1\"]\n[cluster.transports]\nps = \"zero mq\"\n"),
            "c.toml:4:6: cluster.transports.ps: expected a transport scheme such as \"tcp\", \"zmq\" or \"rdma\" "
            "(lower-case letters, digits, '+', '-' and '.'), got \"zero mq\"");
}

TEST(ClusterConfig, PluginSchemesAreLeftToThePluginCheck) {
  // A third-party transport plugin may serve "quic": `weft config check`
  // and the command that starts a task check it against the loaded
  // plugins (dist::CheckTransports).
  auto config = Parse("[cluster]\ntransport = \"quic\"\n[cluster.jobs]\nps = [\"a:1\"]\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->cluster->transport, "quic");
}

TEST(ClusterConfig, TransportOverrideOfAnAbsentJob) {
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [\"a:1\"]\nworker = [\"a:2\"]\n[cluster.transports]\nwrker = \"zmq\"\n"),
            "c.toml:5:1: cluster.transports.wrker: no job 'wrker' in [cluster.jobs]; did you mean 'worker'?");
  EXPECT_EQ(ErrorOf("[cluster.jobs]\nps = [\"a:1\"]\n[cluster.transports]\nchief = \"zmq\"\n"),
            "c.toml:4:1: cluster.transports.chief: no job 'chief' in [cluster.jobs] (the jobs: 'ps')");
}

// --- This task ---------------------------------------------------------------------------------

constexpr std::string_view kJobs =
    "[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\nworker = [\"127.0.0.1:7071\", \"127.0.0.1:7072\"]\n";

TEST(ClusterConfig, TaskOutOfRange) {
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\njob = \"worker\"\ntask = 3\n", kJobs)),
            "c.toml:3:8: cluster.task: task 3 is out of range: job 'worker' has 2 tasks (0..1)");
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\njob = \"ps\"\ntask = 1\n", kJobs)),
            "c.toml:3:8: cluster.task: task 1 is out of range: job 'ps' has 1 task (0)");
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\njob = \"ps\"\ntask = -1\n", kJobs)),
            "c.toml:3:8: cluster.task: expected an integer >= 0, got -1");
}

TEST(ClusterConfig, JobNamingAnAbsentJob) {
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\njob = \"wroker\"\n", kJobs)),
            "c.toml:2:7: cluster.job: no job \"wroker\" in [cluster.jobs]; did you mean 'worker'?");
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\njob = \"chief\"\n", kJobs)),
            "c.toml:2:7: cluster.job: no job \"chief\" in [cluster.jobs] (the jobs: 'ps', 'worker')");
}

TEST(ClusterConfig, TimeoutsAreAtLeastOneMillisecond) {
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\nconnect_timeout_ms = 0\nrpc_timeout_ms = -5\n", kJobs)),
            "c.toml:2:22: cluster.connect_timeout_ms: expected an integer >= 1, got 0\n"
            "c.toml:3:18: cluster.rpc_timeout_ms: expected an integer >= 1, got -5");
}

// --- Membership --------------------------------------------------------------------------------

TEST(ClusterConfig, ReadsMpiAndSlurmMembership) {
  auto config = Parse(R"([cluster]
membership = "mpi"
base_port = 9000
hosts = ["node01", "Node02"]
[cluster.tasks]
worker = "rest"
ps = 2
[cluster.transports]
ps = "zmq"
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ClusterConfig& cluster = *config->cluster;
  EXPECT_EQ(cluster.membership, Membership::kMpi);
  EXPECT_EQ(cluster.base_port, 9000);
  EXPECT_EQ(cluster.hosts, (std::vector<std::string>{"node01", "node02"}));
  ASSERT_EQ(cluster.jobs.size(), 2u);
  EXPECT_EQ(cluster.jobs[0].name, "worker");
  EXPECT_FALSE(cluster.jobs[0].rank_count.has_value());
  EXPECT_EQ(cluster.jobs[1].name, "ps");
  EXPECT_EQ(cluster.jobs[1].rank_count, 2);
  EXPECT_EQ(cluster.TransportOf(cluster.jobs[1]), "zmq");

  config = Parse("[cluster]\nmembership = \"slurm\"\n[cluster.tasks]\nps = 1\nworker = \"rest\"\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->cluster->membership, Membership::kSlurm);
  EXPECT_EQ(config->cluster->base_port, 7070);
}

TEST(ClusterConfig, LauncherKeysWithStaticMembership) {
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\nbase_port = 7070\nmpi_host = \"a\"\n", kJobs)),
            "c.toml:2:1: cluster.base_port: applies to membership = \"mpi\" or \"slurm\" only, but membership is "
            "\"static\" (the default)\n"
            "c.toml:3:1: cluster.mpi_host: applies to membership = \"mpi\" only, but membership is \"static\" (the "
            "default)");
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\nmembership = \"static\"\n[cluster.tasks]\nps = 1\n", kJobs)),
            "c.toml:3:1: cluster.tasks: applies to membership = \"mpi\" or \"slurm\" only, but membership is "
            "\"static\"");
}

TEST(ClusterConfig, StaticKeysWithLauncherMembership) {
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"mpi\"\njob = \"ps\"\ntask = 0\n[cluster.jobs]\nps = [\"a:1\"]\n"
                    "[cluster.tasks]\nps = \"rest\"\n"),
            "c.toml:3:1: cluster.job: membership is \"mpi\": every process's job and task come from its rank; "
            "remove this key\n"
            "c.toml:4:1: cluster.task: membership is \"mpi\": every process's job and task come from its rank; "
            "remove this key\n"
            "c.toml:5:1: cluster.jobs: static addresses do not apply: membership is \"mpi\", so ranks and hosts "
            "come from the launcher; say how many ranks each job gets in [cluster.tasks] instead");
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"slurm\"\nmpi_host = \"a\"\n[cluster.tasks]\nps = \"rest\"\n"),
            "c.toml:3:1: cluster.mpi_host: applies to membership = \"mpi\" only, but membership is \"slurm\"");
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"mpi\"\nmpi_host = \"a\"\nhosts = [\"b\"]\n[cluster.tasks]\n"
                    "ps = \"rest\"\n"),
            "c.toml:4:1: cluster.hosts: set either mpi_host (all ranks on one host) or hosts (ranks across "
            "hosts), not both");
}

TEST(ClusterConfig, LauncherMembershipNeedsTasks) {
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"mpi\"\n"),
            "c.toml:1:1: cluster: membership = \"mpi\" needs [cluster.tasks]: how many ranks each job gets, in "
            "order, e.g. ps = 1 and worker = \"rest\"");
}

TEST(ClusterConfig, TaskCounts) {
  constexpr std::string_view kMpi = "[cluster]\nmembership = \"mpi\"\n[cluster.tasks]\n";
  EXPECT_EQ(ErrorOf(StrCat(kMpi, "ps = 0\n")),
            "c.toml:4:6: cluster.tasks.ps: expected the number of ranks job 'ps' gets (an integer >= 1) or "
            "\"rest\", got 0");
  EXPECT_EQ(ErrorOf(StrCat(kMpi, "ps = \"all\"\n")),
            "c.toml:4:6: cluster.tasks.ps: expected the number of ranks job 'ps' gets (an integer >= 1) or "
            "\"rest\", got \"all\"");
  EXPECT_EQ(ErrorOf(StrCat(kMpi, "ps = \"rest\"\nworker = \"rest\"\n")),
            "c.toml:5:10: cluster.tasks.worker: only one job may take the \"rest\" of the ranks; job 'ps' at "
            "c.toml:4:1 already does");
}

TEST(ClusterConfig, LauncherHostsAreChecked) {
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"mpi\"\nhosts = [\"a\", \"b c\"]\n[cluster.tasks]\nps = \"rest\"\n"),
            "c.toml:3:15: cluster.hosts[1]: expected a host, got \"b c\": \"b c\" is not a hostname (letters, "
            "digits, '-' and '_', in labels joined by '.')");
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"mpi\"\nmpi_host = \"1.2.3\"\n[cluster.tasks]\nps = \"rest\"\n"),
            "c.toml:3:12: cluster.mpi_host: expected a host, got \"1.2.3\": \"1.2.3\" is not an IPv4 address (four "
            "numbers 0..255 joined by '.')");
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"slurm\"\nbase_port = 70000\n[cluster.tasks]\nps = \"rest\"\n"),
            "c.toml:3:13: cluster.base_port: expected an integer in [1, 65535], got 70000");
}

TEST(ClusterConfig, EveryErrorAtOnceInFileOrder) {
  EXPECT_EQ(ErrorOf("[cluster]\nrpc_timeout_ms = 0\n[cluster.jobs]\nPS = [\"a:1\"]\nworker = [\"a\"]\n"),
            "c.toml:2:18: cluster.rpc_timeout_ms: expected an integer >= 1, got 0\n"
            "c.toml:4:1: cluster.jobs.PS: job names are lower_snake_case (letters, digits and '_', starting with a "
            "letter), as in /job:<name>\n"
            "c.toml:5:11: cluster.jobs.worker[0]: expected host:port, got \"a\": it has no port (write host:port, "
            "e.g. \"127.0.0.1:7070\")");
}

TEST(ClusterConfig, AWrongValueDoesNotHideTheOtherChecks) {
  EXPECT_EQ(ErrorOf(R"([cluster]
connect_timeout_ms = 0
job = "worker"
task = 3
transport = "TCP"
[cluster.jobs]
ps = ["127.0.0.1:7070"]
worker = ["127.0.0.1:7071", "127.0.0.1:7070"]
chief = ["10.0.0.5"]
ParamServer = ["[::1]:7073"]
)"),
            "c.toml:2:22: cluster.connect_timeout_ms: expected an integer >= 1, got 0\n"
            "c.toml:4:8: cluster.task: task 3 is out of range: job 'worker' has 2 tasks (0..1)\n"
            "c.toml:5:13: cluster.transport: expected a transport scheme such as \"tcp\", \"zmq\" or \"rdma\" "
            "(lower-case letters, digits, '+', '-' and '.'), got \"TCP\"; did you mean \"tcp\"?\n"
            "c.toml:8:29: cluster.jobs.worker[1]: address \"127.0.0.1:7070\" is also used by job 'ps' task 0 at "
            "c.toml:7:7; give every task its own host:port\n"
            "c.toml:9:10: cluster.jobs.chief[0]: expected host:port, got \"10.0.0.5\": it has no port (write "
            "host:port, e.g. \"127.0.0.1:7070\")\n"
            "c.toml:10:1: cluster.jobs.ParamServer: job names are lower_snake_case (letters, digits and '_', "
            "starting with a letter), as in /job:<name>");
  // With the membership itself wrong, its checks wait.
  EXPECT_EQ(ErrorOf("[cluster]\nmembership = \"mpirun\"\nbase_port = 1\n[cluster.tasks]\nps = 1\n"),
            "c.toml:2:14: cluster.membership: expected one of \"static\", \"mpi\", \"slurm\", got \"mpirun\"");
}

TEST(ClusterConfig, TransferDtypeIsF32UnlessBf16IsAskedFor) {
  auto plain = Parse("[cluster]\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->cluster->transfer_dtype, "f32");
  auto narrow = Parse("[cluster]\ntransfer_dtype = \"bf16\"\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n");
  ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
  EXPECT_EQ(narrow->cluster->transfer_dtype, "bf16");
  EXPECT_EQ(ErrorOf("[cluster]\ntransfer_dtype = \"f16\"\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n"),
            "c.toml:2:18: cluster.transfer_dtype: expected one of \"f32\", \"bf16\", got \"f16\"");
}

TEST(ClusterConfig, VariablesAreReadAtTheStartUnlessLateIsAskedFor) {
  auto plain = Parse("[cluster]\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->cluster->variable_reads, "at_start");
  auto late = Parse("[cluster]\nvariable_reads = \"late\"\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n");
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(late->cluster->variable_reads, "late");
  EXPECT_EQ(ErrorOf("[cluster]\nvariable_reads = \"lazy\"\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n"),
            "c.toml:2:18: cluster.variable_reads: expected one of \"at_start\", \"late\", got \"lazy\"");
}

TEST(ClusterConfig, KeysAreListedForWeftConfigKeys) {
  std::set<std::string> names;
  for (const auto& [key, spec] : CoreKeys()) {
    names.insert(key);
    EXPECT_FALSE(spec.doc.empty()) << key;
  }
  for (const char* key : {"cluster.transport", "cluster.connect_timeout_ms", "cluster.rpc_timeout_ms", "cluster.job",
                          "cluster.task", "cluster.membership", "cluster.base_port", "cluster.mpi_host",
                          "cluster.hosts", "cluster.jobs.<job>", "cluster.transports.<job>", "cluster.tasks.<job>"}) {
    EXPECT_EQ(names.count(key), 1u) << key;
  }
}

}  // namespace
}  // namespace weft::config

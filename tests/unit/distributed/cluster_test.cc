// ResolveCluster: static clusters with --job/--task, and the mapping of
// mpirun's and srun's ranks to jobs, hosts and ports (docs/distributed.md),
// with injected environments. Expected addresses follow the documented
// rule by hand: ranks fill [cluster.tasks] in order; a task's port is
// base_port + its index on its host.
#include "core/distributed/cluster.h"

#include <gtest/gtest.h>

#include "core/distributed/cluster_runtime.h"

namespace weft::dist {
namespace {

using config::Config;

constexpr std::string_view kStatic = R"([cluster]
[cluster.jobs]
ps = ["127.0.0.1:7070"]
worker = ["127.0.0.1:7071", "127.0.0.1:7072"]
)";

Config ParseOrDie(std::string_view text) {
  auto config = config::ParseConfig(text, "c.toml", "");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : Config{};
}

// The tasks as "/job:ps/task:0 tcp://127.0.0.1:7070 rank 0" lines.
std::vector<std::string> Tasks(const ClusterSpec& cluster) {
  std::vector<std::string> out;
  for (const JobSpec& job : cluster.jobs) {
    for (const TaskSpec& task : job.tasks) {
      out.push_back(
          StrCat(TaskPrefix(job.name, task.index), " ", task.Url(), task.rank >= 0 ? StrCat(" rank ", task.rank) : ""));
    }
  }
  return out;
}

std::string ErrorOf(std::string_view text, std::optional<std::string> job, std::optional<int64_t> task,
                    const Environment& env = {}) {
  auto cluster = ResolveCluster(ParseOrDie(text), job, task, env);
  EXPECT_FALSE(cluster.ok());
  return cluster.ok() ? "" : cluster.status().message();
}

// |env| with |key| set to |value|.
Environment With(Environment env, const std::string& key, const std::string& value) {
  env[key] = value;
  return env;
}
// |env| without |key|.
Environment Without(Environment env, const std::string& key) {
  env.erase(key);
  return env;
}

// Resolving |text| (a launcher's cluster) in each environment of |cases|
// fails with its message.
void ExpectLauncherErrors(std::string_view text, const std::vector<std::pair<Environment, std::string>>& cases) {
  for (const auto& [env, message] : cases) EXPECT_EQ(ErrorOf(text, std::nullopt, std::nullopt, env), message);
}

// --- Device names -------------------------------------------------------------------------------

TEST(DeviceNames, TaskPrefix) {
  EXPECT_EQ(TaskPrefix("ps", 0), "/job:ps/task:0");
  EXPECT_EQ(TaskPrefix("worker", 12), "/job:worker/task:12");
  EXPECT_EQ((TaskId{"worker", 1}).ToString(), "/job:worker/task:1");
}

TEST(DeviceNames, ParsesQualifiedNames) {
  auto name = ParseTaskDeviceName("/job:worker/task:1/device:CPU:0");
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_EQ(name->job, "worker");
  EXPECT_EQ(name->task, 1);
  EXPECT_EQ(name->device, "/device:CPU:0");
  EXPECT_EQ(name->ToString(), "/job:worker/task:1/device:CPU:0");
  name = ParseTaskDeviceName("/job:ps/task:0");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->device, "");
  name = ParseTaskDeviceName("/job:ps/task:3/device:opencl:12");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->ToString(), "/job:ps/task:3/device:OPENCL:12");
}

TEST(DeviceNames, RejectsWhatIsNotATasksDevice) {
  const std::string kHow =
      "); write /job:<job>/task:<n>, optionally followed by /device:<TYPE>:<n>, as in /job:worker/task:1/device:CPU:0";
  const std::pair<const char*, const char*> cases[] = {
      {"/device:CPU:0", "it does not start with /job:"},
      {"/job:Worker/task:0", "the job \"Worker\" is not lower_snake_case"},
      {"/job:/task:0", "the job \"\" is not lower_snake_case"},
      {"/job:ps", "no /task:<n> after the job"},
      {"/job:ps/replica:0/task:0", "expected /task:<n> after the job"},
      {"/job:ps/task:x", "the task \"x\" is not a number >= 0"},
      {"/job:ps/task:-1", "the task \"-1\" is not a number >= 0"},
      {"/job:ps/task:0/cpu:0", "expected /device:<TYPE>:<n> after the task, got \"/cpu:0\""},
      {"/job:ps/task:0/device:CPU", "the device needs an index, as in /device:CPU:0"},
      {"/job:ps/task:0/device:CPU:*", "the device needs an index, as in /device:CPU:0"},
      {"/job:ps/task:0/device::0", "the device type \"\" is not letters, digits and '_'"},
  };
  for (const auto& [text, why] : cases) {
    auto name = ParseTaskDeviceName(text);
    ASSERT_FALSE(name.ok()) << text;
    EXPECT_EQ(name.status().message(), StrCat("\"", text, "\" is not a task's device name (", why, kHow)) << text;
  }
}

// --- Static membership --------------------------------------------------------------------------

TEST(ResolveCluster, NoSectionIsASingleProcess) {
  auto cluster = ResolveCluster(ParseOrDie(""), std::nullopt, std::nullopt, {});
  ASSERT_TRUE(cluster.ok());
  EXPECT_FALSE(cluster->distributed());
  EXPECT_EQ(cluster->Self(), nullptr);
  EXPECT_EQ(ErrorOf("", "worker", std::nullopt),
            "--job worker given, but c.toml has no [cluster] section: a single process has no job or task. Add "
            "[cluster] (see docs/distributed.md) or drop the flag");
  EXPECT_EQ(ErrorOf("", std::nullopt, 1),
            "--task 1 given, but c.toml has no [cluster] section: a single process has no job or task. Add "
            "[cluster] (see docs/distributed.md) or drop the flag");
}

TEST(ResolveCluster, StaticJobsTasksAndTransports) {
  auto cluster = ResolveCluster(ParseOrDie(StrCat(kStatic, "[cluster.transports]\nps = \"zmq\"\n")), std::nullopt,
                                std::nullopt, {});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_TRUE(cluster->distributed());
  EXPECT_EQ(Tasks(*cluster),
            (std::vector<std::string>{"/job:ps/task:0 zmq://127.0.0.1:7070", "/job:worker/task:0 tcp://127.0.0.1:7071",
                                      "/job:worker/task:1 tcp://127.0.0.1:7072"}));
  EXPECT_EQ(cluster->num_tasks(), 3u);
  EXPECT_FALSE(cluster->self.has_value());
  EXPECT_EQ(cluster->connect_timeout_ms, 10000);
  EXPECT_EQ(cluster->rpc_timeout_ms, 60000);
  EXPECT_EQ(cluster->FindTask({"worker", 2}), nullptr);
  EXPECT_EQ(cluster->FindTask({"chief", 0}), nullptr);
  ASSERT_NE(cluster->FindTask({"worker", 1}), nullptr);
  EXPECT_EQ(cluster->FindTask({"worker", 1})->address.port, 7072);
}

TEST(ResolveCluster, ShippedLocalClusterResolves) {
  auto config = config::LoadConfigFile(WEFT_SOURCE_DIR "/configs/cluster_local.toml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto cluster = ResolveCluster(*config, "worker", 1, {});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(Tasks(*cluster),
            (std::vector<std::string>{"/job:ps/task:0 tcp://127.0.0.1:7070", "/job:worker/task:0 tcp://127.0.0.1:7071",
                                      "/job:worker/task:1 tcp://127.0.0.1:7072"}));
  ASSERT_NE(cluster->Self(), nullptr);
  EXPECT_EQ(cluster->self->ToString(), "/job:worker/task:1");
  EXPECT_EQ(cluster->Self()->Url(), "tcp://127.0.0.1:7072");
}

TEST(ResolveCluster, FlagsOverrideTheFile) {
  const std::string text = StrCat("[cluster]\njob = \"worker\"\ntask = 1\n", kStatic.substr(10));
  auto from_file = ResolveCluster(ParseOrDie(text), std::nullopt, std::nullopt, {});
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->self->ToString(), "/job:worker/task:1");
  auto task_flag = ResolveCluster(ParseOrDie(text), std::nullopt, 0, {});
  ASSERT_TRUE(task_flag.ok());
  EXPECT_EQ(task_flag->self->ToString(), "/job:worker/task:0");
  // --job alone keeps the file's task when it fits the new job ...
  EXPECT_EQ(ErrorOf(text, "ps", std::nullopt),
            "[cluster] task = 1 (c.toml:3:8) is out of range: job 'ps' has 1 task (0)");
  // ... and both flags replace both keys.
  auto both = ResolveCluster(ParseOrDie(text), "ps", 0, {});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->self->ToString(), "/job:ps/task:0");
}

TEST(ResolveCluster, TaskDefaultsToZeroOnlyForAOneTaskJob) {
  auto ps = ResolveCluster(ParseOrDie(kStatic), "ps", std::nullopt, {});
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  EXPECT_EQ(ps->self->ToString(), "/job:ps/task:0");
  EXPECT_EQ(ErrorOf(kStatic, "worker", std::nullopt),
            "job 'worker' has 2 tasks (0..1); say which this process is with --task (or [cluster] task)");
}

TEST(ResolveCluster, SelfErrors) {
  EXPECT_EQ(ErrorOf(kStatic, "worker", 2), "--task 2 is out of range: job 'worker' has 2 tasks (0..1)");
  EXPECT_EQ(ErrorOf(kStatic, "wrker", 0),
            "--job names job \"wrker\", which [cluster.jobs] of c.toml does not have; did you mean 'worker'?");
  EXPECT_EQ(ErrorOf(kStatic, "chief", 0),
            "--job names job \"chief\", which [cluster.jobs] of c.toml does not have (the jobs: 'ps', 'worker')");
  EXPECT_EQ(ErrorOf(kStatic, std::nullopt, 1),
            "--task 1 says which task this process is, but nothing says of which job: pass --job (or set "
            "[cluster] job)");
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\ntask = 1\n", kStatic.substr(10)), std::nullopt, std::nullopt),
            "[cluster] task = 1 (c.toml:2:8) says which task this process is, but nothing says of which job: pass "
            "--job (or set [cluster] job)");
  EXPECT_EQ(ErrorOf(StrCat("[cluster]\njob = \"ps\"\n", kStatic.substr(10)), "wrker", std::nullopt),
            "--job names job \"wrker\", which [cluster.jobs] of c.toml does not have; did you mean 'worker'?");
  EXPECT_EQ(ErrorOf(kStatic, "worker", -1), "--task -1 is negative; tasks count from 0");
}

// --- Open MPI -----------------------------------------------------------------------------------

constexpr std::string_view kMpi = R"([cluster]
membership = "mpi"
[cluster.tasks]
ps = 1
worker = "rest"
)";

Environment Ompi(int rank, int size, int local_rank, int local_size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local_rank)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          {"PATH", "/usr/bin"}};
}

TEST(ResolveCluster, MpiOnOneHost) {
  // mpirun -np 3 on one host: ranks 0, 1, 2 -> ps 0, worker 0, worker 1;
  // ports 7070 + rank.
  for (int rank = 0; rank < 3; ++rank) {
    auto cluster = ResolveCluster(ParseOrDie(kMpi), std::nullopt, std::nullopt, Ompi(rank, 3, rank, 3));
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    EXPECT_EQ(Tasks(*cluster), (std::vector<std::string>{"/job:ps/task:0 tcp://127.0.0.1:7070 rank 0",
                                                         "/job:worker/task:0 tcp://127.0.0.1:7071 rank 1",
                                                         "/job:worker/task:1 tcp://127.0.0.1:7072 rank 2"}));
    const char* expected[] = {"/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"};
    EXPECT_EQ(cluster->self->ToString(), expected[rank]);
    EXPECT_EQ(cluster->Self()->rank, rank);
  }
}

TEST(ResolveCluster, ShippedMpiClusterIsTheLocalOne) {
  auto config = config::LoadConfigFile(WEFT_SOURCE_DIR "/configs/cluster_mpi.toml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto cluster = ResolveCluster(*config, std::nullopt, std::nullopt, Ompi(2, 3, 2, 3));
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(Tasks(*cluster), (std::vector<std::string>{"/job:ps/task:0 tcp://127.0.0.1:7070 rank 0",
                                                       "/job:worker/task:0 tcp://127.0.0.1:7071 rank 1",
                                                       "/job:worker/task:1 tcp://127.0.0.1:7072 rank 2"}));
  EXPECT_EQ(cluster->self->ToString(), "/job:worker/task:1");
}

TEST(ResolveCluster, MpiHostAndBasePort) {
  const std::string text = R"([cluster]
membership = "mpi"
mpi_host = "10.1.2.3"
base_port = 9000
transport = "zmq"
[cluster.tasks]
worker = 2
ps = "rest"
[cluster.transports]
ps = "tcp"
)";
  auto cluster = ResolveCluster(ParseOrDie(text), std::nullopt, std::nullopt, Ompi(0, 4, 0, 4));
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(Tasks(*cluster),
            (std::vector<std::string>{
                "/job:worker/task:0 zmq://10.1.2.3:9000 rank 0", "/job:worker/task:1 zmq://10.1.2.3:9001 rank 1",
                "/job:ps/task:0 tcp://10.1.2.3:9002 rank 2", "/job:ps/task:1 tcp://10.1.2.3:9003 rank 3"}));
  EXPECT_EQ(cluster->self->ToString(), "/job:worker/task:0");
}

TEST(ResolveCluster, MpiAcrossHostsFillsThemBySlot) {
  // mpirun -np 4 -npernode 2 over node01 and node02: ranks 0, 1 on node01,
  // 2, 3 on node02; the index on the host picks the port.
  const std::string text = StrCat(kMpi.substr(0, 29), "hosts = [\"node01\", \"node02\"]\n", kMpi.substr(29));
  auto cluster = ResolveCluster(ParseOrDie(text), std::nullopt, std::nullopt, Ompi(3, 4, 1, 2));
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(Tasks(*cluster),
            (std::vector<std::string>{
                "/job:ps/task:0 tcp://node01:7070 rank 0", "/job:worker/task:0 tcp://node01:7071 rank 1",
                "/job:worker/task:1 tcp://node02:7070 rank 2", "/job:worker/task:2 tcp://node02:7071 rank 3"}));
  EXPECT_EQ(cluster->self->ToString(), "/job:worker/task:2");

  EXPECT_EQ(ErrorOf(text, std::nullopt, std::nullopt, Ompi(3, 5, 1, 2)),
            "c.toml: membership = \"mpi\" (c.toml:2:14): [cluster] hosts lists 2 hosts and this host runs "
            "OMPI_COMM_WORLD_LOCAL_SIZE=2 ranks, but OMPI_COMM_WORLD_SIZE=5 is not 2 x 2: start the same number "
            "of ranks on every listed host, e.g. mpirun -np 4 -npernode 2");
  EXPECT_EQ(ErrorOf(text, std::nullopt, std::nullopt, Ompi(3, 4, 0, 2)),
            "c.toml: membership = \"mpi\" (c.toml:2:14): rank 3 has OMPI_COMM_WORLD_LOCAL_RANK=0, but filling the "
            "hosts in order gives it 1: start with mpirun --map-by slot (the default), not by node");
}

TEST(ResolveCluster, MpiAcrossHostsWithoutHostsSaysHowToLaunch) {
  EXPECT_EQ(ErrorOf(kMpi, std::nullopt, std::nullopt, Ompi(1, 4, 1, 2)),
            "c.toml: membership = \"mpi\" (c.toml:2:14): the ranks span hosts (OMPI_COMM_WORLD_LOCAL_SIZE=2 of "
            "OMPI_COMM_WORLD_SIZE=4): list the hosts in [cluster] hosts = [...] in the order mpirun fills them, "
            "and start the same number of ranks on each (mpirun -npernode N); or start every rank on one host");
}

TEST(ResolveCluster, MpiVariablesMissingOrGarbled) {
  const std::string where = "c.toml: membership = \"mpi\" (c.toml:2:14)";
  ExpectLauncherErrors(
      kMpi,
      {{Environment{{"PATH", "/usr/bin"}},
        where + ", but OMPI_COMM_WORLD_SIZE is not set: start every task with Open MPI's mpirun, e.g. mpirun -np 3 "
                "weft serve --config c.toml"},
       {With(Ompi(0, 3, 0, 3), "OMPI_COMM_WORLD_RANK", "zero"),
        where + ", but OMPI_COMM_WORLD_RANK is \"zero\", not an integer >= 0"},
       {With(Ompi(0, 3, 0, 3), "OMPI_COMM_WORLD_SIZE", "0"),
        where + ", but OMPI_COMM_WORLD_SIZE is \"0\", not an integer >= 1"},
       {Without(Ompi(0, 3, 0, 3), "OMPI_COMM_WORLD_LOCAL_SIZE"),
        where + ", but OMPI_COMM_WORLD_LOCAL_SIZE is not set: start every task with Open MPI's mpirun, e.g. mpirun "
                "-np 3 weft serve --config c.toml"},
       {Ompi(3, 3, 0, 3), where + ": OMPI_COMM_WORLD_RANK=3 is not below OMPI_COMM_WORLD_SIZE=3"},
       {Ompi(0, 3, 3, 3),
        where + ": OMPI_COMM_WORLD_LOCAL_RANK=3 and OMPI_COMM_WORLD_LOCAL_SIZE=3 do not fit OMPI_COMM_WORLD_SIZE=3"}});
}

TEST(ResolveCluster, RankCountsMustFitTheWorld) {
  const std::string fixed = "[cluster]\nmembership = \"mpi\"\n[cluster.tasks]\nps = 1\nworker = 2\n";
  EXPECT_EQ(ErrorOf(fixed, std::nullopt, std::nullopt, Ompi(0, 2, 0, 2)),
            "c.toml: [cluster.tasks] (ps = 1, worker = 2) needs 3 ranks, but the launcher started 2 "
            "(OMPI_COMM_WORLD_SIZE=2): start more ranks or lower the counts");
  EXPECT_EQ(ErrorOf(fixed, std::nullopt, std::nullopt, Ompi(0, 5, 0, 5)),
            "c.toml: [cluster.tasks] (ps = 1, worker = 2) gives jobs ranks 0..2, but the launcher started 5 "
            "(OMPI_COMM_WORLD_SIZE=5), leaving ranks 3..4 without a job: give one job \"rest\", or start exactly 3 "
            "ranks");
  EXPECT_EQ(ErrorOf(kMpi, std::nullopt, std::nullopt, Ompi(0, 1, 0, 1)),
            "c.toml: [cluster.tasks] (ps = 1, worker = \"rest\") needs at least 2 ranks, but the launcher started 1 "
            "(OMPI_COMM_WORLD_SIZE=1): start more ranks or lower the counts");
  auto exact = ResolveCluster(ParseOrDie(fixed), std::nullopt, std::nullopt, Ompi(2, 3, 2, 3));
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->self->ToString(), "/job:worker/task:1");
}

TEST(ResolveCluster, PortPast65535) {
  const std::string text = StrCat("[cluster]\nmembership = \"mpi\"\nbase_port = 65534\n", kMpi.substr(29));
  EXPECT_EQ(ErrorOf(text, std::nullopt, std::nullopt, Ompi(0, 3, 0, 3)),
            "c.toml: [cluster] base_port = 65534 (c.toml:3:13) plus 2 (the index of rank 2 on 127.0.0.1) is past "
            "port 65535: lower base_port");
}

TEST(ResolveCluster, LauncherFlagsMayOnlyAgree) {
  auto agreeing = ResolveCluster(ParseOrDie(kMpi), "worker", 0, Ompi(1, 3, 1, 3));
  ASSERT_TRUE(agreeing.ok()) << agreeing.status().ToString();
  EXPECT_EQ(agreeing->self->ToString(), "/job:worker/task:0");
  EXPECT_EQ(ErrorOf(kMpi, "ps", std::nullopt, Ompi(1, 3, 1, 3)),
            "--job ps disagrees with the launcher: with membership = \"mpi\" this rank is /job:worker/task:0 by "
            "[cluster.tasks]; drop the flag");
  EXPECT_EQ(ErrorOf(kMpi, "worker", 1, Ompi(1, 3, 1, 3)),
            "--job worker --task 1 disagrees with the launcher: with membership = \"mpi\" this rank is "
            "/job:worker/task:0 by [cluster.tasks]; drop the flag");
}

// --- Slurm --------------------------------------------------------------------------------------

constexpr std::string_view kSlurm = R"([cluster]
membership = "slurm"
[cluster.tasks]
ps = 1
worker = "rest"
)";

Environment Slurm(int procid, int ntasks, std::string nodelist, std::string tasks_per_node) {
  return {{"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_NTASKS", std::to_string(ntasks)},
          {"SLURM_STEP_NODELIST", std::move(nodelist)},
          {"SLURM_STEP_TASKS_PER_NODE", std::move(tasks_per_node)}};
}

TEST(ResolveCluster, SlurmBlockLayout) {
  // srun -N 3 -n 5 with 2(x2),1: node01 runs ranks 0-1, node02 2-3,
  // node04 4.
  auto cluster =
      ResolveCluster(ParseOrDie(kSlurm), std::nullopt, std::nullopt, Slurm(3, 5, "node[01-02,04]", "2(x2),1"));
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(Tasks(*cluster),
            (std::vector<std::string>{
                "/job:ps/task:0 tcp://node01:7070 rank 0", "/job:worker/task:0 tcp://node01:7071 rank 1",
                "/job:worker/task:1 tcp://node02:7070 rank 2", "/job:worker/task:2 tcp://node02:7071 rank 3",
                "/job:worker/task:3 tcp://node04:7070 rank 4"}));
  EXPECT_EQ(cluster->self->ToString(), "/job:worker/task:2");
}

TEST(ResolveCluster, SlurmFallsBackToTheJobVariables) {
  Environment env = {{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_JOB_NODELIST", "a,b"},
                     {"SLURM_TASKS_PER_NODE", "1(x2)"},
                     {"SLURM_LOCALID", "0"}};
  auto cluster = ResolveCluster(ParseOrDie(kSlurm), std::nullopt, std::nullopt, env);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_EQ(Tasks(*cluster),
            (std::vector<std::string>{"/job:ps/task:0 tcp://a:7070 rank 0", "/job:worker/task:0 tcp://b:7070 rank 1"}));
}

TEST(ResolveCluster, SlurmVariablesMissingOrGarbled) {
  const std::string where = "c.toml: membership = \"slurm\" (c.toml:2:14)";
  ExpectLauncherErrors(
      kSlurm,
      {{Environment{},
        where + ", but SLURM_NTASKS is not set: start every task with srun in a Slurm allocation, e.g. srun -n 3 "
                "weft serve --config c.toml"},
       {Slurm(0, 3, "node[01-03", "1(x3)"),
        where + ": SLURM_STEP_NODELIST is \"node[01-03\": entry \"node[01-03\" has a '[' without ']'"},
       {Slurm(0, 3, "node[01-03]", "1(3)"),
        where + ": SLURM_STEP_TASKS_PER_NODE is \"1(3)\": entry \"1(3)\" is not a count N or N(xM) (M nodes of N "
                "tasks)"},
       {Slurm(0, 3, "node[01-03]", "1(x2)"),
        where + ": SLURM_STEP_NODELIST=node[01-03] names 3 hosts, but SLURM_STEP_TASKS_PER_NODE=1(x2) gives task "
                "counts for 2"},
       {Slurm(0, 3, "node[01-03]", "2(x3)"),
        where + ": SLURM_STEP_TASKS_PER_NODE=2(x3) adds up to 6 tasks, but SLURM_NTASKS=3"},
       {Without(Slurm(0, 3, "node[01-03]", "1(x3)"), "SLURM_STEP_NODELIST"),
        where + ", but neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set: start every task with srun in a "
                "Slurm allocation, e.g. srun -n 3 weft serve --config c.toml"},
       {Slurm(0, 3, "node_[1-3]!", "1(x3)"),
        where + ": SLURM_STEP_NODELIST is \"node_[1-3]!\": \"node_1!\" is not a hostname (letters, digits, '-' and "
                "'_', in labels joined by '.')"},
       {With(Slurm(1, 2, "n1", "2"), "SLURM_PROCID", "1x"),
        where + ", but SLURM_PROCID is \"1x\", not an integer >= 0"}});
}

TEST(ResolveCluster, SlurmCyclicDistributionIsRefused) {
  // With --distribution=cyclic rank 1 runs on the second node, as its
  // first task there.
  Environment env = Slurm(1, 4, "n[1-2]", "2(x2)");
  env["SLURM_LOCALID"] = "0";
  EXPECT_EQ(ErrorOf(kSlurm, std::nullopt, std::nullopt, env),
            "c.toml: membership = \"slurm\" (c.toml:2:14): rank 1 has SLURM_LOCALID=0, but block distribution gives it "
            "1 on n1: start with srun --distribution=block (the default), not cyclic");
}

// --- Transports against the loaded plugins ------------------------------------------------------

TEST(CheckTransports, UnknownSchemesAreErrorsAndUnloadedBuiltinsWarnings) {
  Config config = ParseOrDie(R"([cluster]
transport = "quic"
[cluster.jobs]
ps = ["a:1"]
worker = ["a:2"]
chief = ["a:3"]
[cluster.transports]
ps = "rdma"
chief = "tpc"
)");
  TransportCheck check = CheckTransports(*config.cluster, {"tcp"});
  ASSERT_EQ(check.errors.size(), 2u);
  EXPECT_EQ(check.errors[0].ToString(),
            "c.toml:2:13: cluster.transport: unknown transport \"quic\": not built in (tcp, zmq, rdma) and no loaded "
            "plugin serves it");
  EXPECT_EQ(check.errors[1].ToString(),
            "c.toml:9:9: cluster.transports.chief: unknown transport \"tpc\": not built in (tcp, zmq, rdma) and no "
            "loaded plugin serves it; did you mean \"tcp\"?");
  ASSERT_EQ(check.warnings.size(), 1u);
  EXPECT_EQ(check.warnings[0].ToString(),
            "c.toml:8:6: cluster.transports.ps: the \"rdma\" transport plugin is not loaded on this machine (`weft "
            "plugins` says why); tasks started here cannot use it");

  check = CheckTransports(*config.cluster, {"quic", "tcp", "rdma"});
  EXPECT_EQ(check.errors.size(), 1u);  // "tpc" still
  EXPECT_TRUE(check.warnings.empty());
}

TEST(CheckTransports, TheDefaultIsCheckedOnlyWhenAJobUsesIt) {
  Config config = ParseOrDie("[cluster.jobs]\nps = [\"a:1\"]\n[cluster.transports]\nps = \"zmq\"\n");
  TransportCheck check = CheckTransports(*config.cluster, {"zmq"});
  EXPECT_TRUE(check.errors.empty());
  EXPECT_TRUE(check.warnings.empty());
  // Not written: reported at the section's header.
  config = ParseOrDie("[cluster.jobs]\nps = [\"a:1\"]\n");
  check = CheckTransports(*config.cluster, {});
  ASSERT_EQ(check.warnings.size(), 1u);
  EXPECT_EQ(check.warnings[0].ToString(),
            "c.toml:1:1: cluster.transport: the \"tcp\" transport plugin is not loaded on this machine (`weft plugins` "
            "says why); tasks started here cannot use it");
}

// --- A task's options from the config ---------------------------------------------------------------

// [runtime] reaches the task service of every task: both thread counts
// (intra_op_threads was dropped once, so a worker of a training cluster on
// 2 cores ran each kernel on 2 OpenMP threads whatever the config said,
// and their spinning slowed the other processes).
TEST(ServiceOptionsFor, TakesRuntimeThreadCounts) {
  const Config config = ParseOrDie(StrCat(kStatic, "[runtime]\ninter_op_threads = 3\nintra_op_threads = 1\n"));
  auto cluster = ResolveCluster(config, "worker", 1, {});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto options = ServiceOptionsFor(*cluster, *cluster->self, config);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->inter_op_threads, 3);
  EXPECT_EQ(options->intra_op_threads, 1);
  EXPECT_EQ(options->name, "/job:worker/task:1");
  auto defaults = ServiceOptionsFor(*cluster, *cluster->self, ParseOrDie(kStatic));
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->inter_op_threads, 0);  // from the cores, as a session's
  EXPECT_EQ(defaults->intra_op_threads, 0);
}

}  // namespace
}  // namespace weft::dist

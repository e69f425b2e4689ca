// The one writer of accounting records (src/common/accounting.cpp): sacct's columns first, CSV
// quoting, unknown times, and both files written whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/accounting.hpp"

using harmonia::core::AccountingRecord;

namespace {

AccountingRecord running_job() {
  AccountingRecord r;
  r.job_id = "12";
  r.job_name = "vpic, \"big\"";
  r.user = "alice";
  r.account = "alice";
  r.qos = "relaxed";
  r.submit = 5;
  r.start = 7;
  r.elapsed = 3725;
  r.state = "RUNNING";
  r.nnodes = 2;
  r.ncpus = 64;
  r.bytes_written = 3e9;
  r.charge = 1.5;
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST(AccountingWriter, CsvStartsWithSacctsColumnsAndQuotesWhatNeedsIt) {
  const auto csv = harmonia::common::accounting_csv({running_job()});
  const auto header = csv.substr(0, csv.find('\n'));
  EXPECT_EQ(header.rfind("JobID,JobName,User,Account,QOS,Submit,Start,End,Elapsed,ElapsedRaw,"
                         "State,NNodes,NCPUS,WriteBytes,ReadBytes,",
                         0),
            0U)
      << header;
  const auto row = csv.substr(header.size() + 1);
  EXPECT_EQ(row.rfind("12,\"vpic, \"\"big\"\"\",alice,alice,relaxed,5.000,7.000,Unknown,01:02:05,"
                      "3725.000,RUNNING,2,64,3000000000,0,",
                      0),
            0U)
      << row;
}

TEST(AccountingWriter, JsonHasNullForATimeNotReached) {
  const auto json = harmonia::common::accounting_json({running_job()});
  ASSERT_EQ(json.size(), 1U);
  EXPECT_TRUE(json[0]["End"].is_null());
  EXPECT_EQ(json[0]["Start"], 7.0);
  EXPECT_EQ(json[0]["QOS"], "relaxed");
  EXPECT_EQ(json[0]["Charge"], 1.5);
  EXPECT_EQ(json[0]["Elapsed"], "01:02:05");
}

TEST(AccountingWriter, WritesBothFilesOrThrowsNamingThePath) {
  const auto dir = std::filesystem::temp_directory_path() / ("acct-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto prefix = (dir / "acct").string();
  harmonia::common::write_accounting(prefix, {running_job()});
  EXPECT_EQ(nlohmann::json::parse(slurp(prefix + ".json")).size(), 1U);
  EXPECT_EQ(slurp(prefix + ".csv"), harmonia::common::accounting_csv({running_job()}));
  std::filesystem::remove_all(dir);
  try {
    harmonia::common::write_accounting((dir / "missing" / "acct").string(), {});
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing/acct.json"), std::string::npos) << e.what();
  }
}

// `trace export RUN --format json`: the whole run, losslessly, for other tools.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include <google/protobuf/stubs/logging.h>

#include "cli/command.h"
#include "store/export.h"
#include "store/store.h"

namespace trace::cli {
namespace {

struct Options {
  std::string run;
  std::string format = "json";
  std::string output;  // empty: stdout
};

int Run(const Options& options) {
  if (options.format != "json") {
    return ReportError(InvalidArgument("export format '" + options.format +
                                       "' is not supported here (supported: json)"));
  }
  // A damaged row is reported once, by us; not also by protobuf's logger.
  google::protobuf::SetLogHandler(nullptr);
  store::StoreOptions open;
  open.read_only = true;
  auto st = store::Store::Open(ResolveStorePath(), open);
  if (!st.ok()) return ReportError(st.status());
  auto id = (*st)->ResolveRunId(options.run);
  if (!id.ok()) return ReportError(id.status());
  if (options.output.empty()) {
    Status s = store::ExportRunJson(**st, *id, std::cout);
    return s.ok() ? kExitOk : ReportError(s);
  }
  // Write to a temporary file and rename, so a failed export leaves no partial file.
  std::string tmp = options.output + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return ReportError(IOError(tmp + ": cannot open for writing"));
    Status s = store::ExportRunJson(**st, *id, out);
    if (!s.ok()) {
      out.close();
      std::remove(tmp.c_str());
      return ReportError(s);
    }
  }
  if (std::rename(tmp.c_str(), options.output.c_str()) != 0) {
    return ReportError(IOError(options.output + ": cannot write: " + std::strerror(errno)));
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("export", "Write a whole run (every event, token and digest)");
  cmd->add_option("run", options->run, "Run id or unique prefix")->required()->type_name("RUN");
  cmd->add_option("--format", options->format, "Output format: json")->type_name("FORMAT");
  cmd->add_option("-o,--output", options->output, "Write to FILE instead of stdout")
      ->type_name("FILE");
  cmd->callback([options, exit_code] { *exit_code = Run(*options); });
}

TRACE_REGISTER_COMMAND(50, Setup);

}  // namespace
}  // namespace trace::cli

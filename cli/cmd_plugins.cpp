// `glassbox plugins`: every module found, what it provides and with which parameters.
#include <iostream>

#include "commands.hpp"
#include "glassbox/params.hpp"
#include "session.hpp"

namespace glassbox::cli {

void add_plugins_command(CLI::App& app) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("plugins", "list the plugin modules found, their plugins and parameters");
  cmd->add_option("--plugin-path", *paths, "extra folder of plugin modules");
  auto graph = add_plugins_graph_options(cmd);
  cmd->callback([paths, graph] {
    if (graph(*paths)) return;
    Registry reg;
    reg.load_default(std::vector<std::filesystem::path>(paths->begin(), paths->end()));
    if (Registry::has_linked_modules()) std::cout << "built-in modules: linked in\n";
    std::cout << "search path:\n";
    for (const auto& d : Registry::search_path(std::vector<std::filesystem::path>(paths->begin(), paths->end())))
      std::cout << "  " << d.string() << "\n";
    for (const auto& e : reg.list()) {
      std::cout << "\n" << kind_name(e.kind) << " " << e.info.name << " — " << e.info.help << "\n"
                << "  module " << e.module_name << " (" << e.where() << ")\n";
      if (e.accepts) std::cout << "  chosen for models it accepts: " << *e.accepts << "\n";
      for (const auto& p : e.info.params) {
        std::cout << "  " << p.name << (p.name == e.info.main_param ? " (main)" : "") << ": "
                  << param_type_name(p.type) << ", default " << (p.default_value.empty() ? "\"\"" : p.default_value);
        if (p.min || p.max)
          std::cout << ", range [" << (p.min ? format_param_value(*p.min) : "-inf") << ", "
                    << (p.max ? format_param_value(*p.max) : "inf") << "]";
        std::cout << " — " << p.help << "\n";
      }
    }
    if (!reg.rejections().empty()) {
      std::cout << "\nrejected modules:\n";
      for (const auto& r : reg.rejections()) std::cout << "  " << r.to_string() << "\n";
    }
  });
}

}  // namespace glassbox::cli

// A shared library without glassbox's entry point.
extern "C" __attribute__((visibility("default"))) int not_a_glassbox_module() { return 42; }

// glassbox under node (web/web.cmake, --pre-js): getenv sees the host's environment (GLASSBOX_KERNELS,
// GLASSBOX_TEST_DATA, NO_COLOR, ...) as the native binary does; emscripten otherwise shows only its defaults.
Module['preRun'] = [].concat(Module['preRun'] || [], function () { Object.assign(ENV, process.env); });

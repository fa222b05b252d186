// glassbox under node (web/web.cmake, --pre-js): the host's environment and streams as the native binary sees them.
//  - getenv sees the host's environment (GLASSBOX_KERNELS, GLASSBOX_TEST_DATA, NO_COLOR, ...); emscripten
//    otherwise shows only its defaults.
//  - A file opened through NODERAWFS that is not a regular file (/dev/stderr as a pipe, a FIFO, a terminal) is
//    written where it stands: NODERAWFS marks every stream seekable and writes at the stream's position
//    (pwrite), which a pipe or a terminal refuses with ESPIPE, so `run --trace /dev/stderr` failed with
//    "write failed: Invalid seek".
// (The host's umask: web/umask.cpp.)
Module['preRun'] = [].concat(Module['preRun'] || [], function () {
  Object.assign(ENV, process.env);
  var nodeFs = require('fs');
  var open = FS.open;
  FS.open = function () {
    var stream = open.apply(this, arguments);
    if (stream && !stream.stream_ops && typeof stream.nfd === 'number' && !nodeFs.fstatSync(stream.nfd).isFile()) stream.seekable = false;
    return stream;
  };
});

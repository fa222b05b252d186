# glassbox_add_plugin(NAME SOURCES...): builds an out-of-tree glassbox module (a shared library).
function(glassbox_add_plugin name)
  add_library(${name} MODULE ${ARGN})
  target_link_libraries(${name} PRIVATE glassbox::glassbox)
  set_target_properties(${name} PROPERTIES PREFIX "" OUTPUT_NAME "gb_${name}"
    CXX_STANDARD 20 CXX_VISIBILITY_PRESET hidden)
endfunction()

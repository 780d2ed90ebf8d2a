# Per-layer include roots: fuserank_layer(<target> <layer>) gives <target> a private include
# root that holds only the headers its layer may include by scripts/layers.txt (its own and
# those of the layers it lists), so an include of a forbidden layer fails to compile, not
# only scripts/check_layers.py. A root is a folder of symbolic links under
# ${CMAKE_BINARY_DIR}/layers/, rebuilt at every configure (a new header re-runs it through
# CONFIGURE_DEPENDS). Layers that may include everything (`*`) get the repository root.
# The generated protos come with fuserank_proto, for the targets that link it.

file(STRINGS ${PROJECT_SOURCE_DIR}/scripts/layers.txt _fuserank_layer_lines)
# An edit of layers.txt alone (a new edge, a removed one) re-runs CMake, so the include roots
# below follow it.
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${PROJECT_SOURCE_DIR}/scripts/layers.txt)
set(FUSERANK_LAYERS "")
foreach(_line IN LISTS _fuserank_layer_lines)
  string(REGEX REPLACE "#.*" "" _line "${_line}")
  if(_line MATCHES "^([a-z_/]+):([^|]*)")
    set(_name ${CMAKE_MATCH_1})
    string(STRIP "${CMAKE_MATCH_2}" _deps)
    separate_arguments(_deps)
    list(APPEND FUSERANK_LAYERS ${_name})
    set(FUSERANK_LAYER_DEPS_${_name} ${_deps})
  endif()
endforeach()
file(REMOVE_RECURSE ${CMAKE_BINARY_DIR}/layers)

# Headers of `layer`: below its folder, but not below a deeper layer's folder.
function(_fuserank_layer_headers layer out)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
       ${PROJECT_SOURCE_DIR}/${layer}/*.h ${PROJECT_SOURCE_DIR}/${layer}/*.cuh)
  set(own "")
  foreach(h IN LISTS headers)
    set(mine TRUE)
    foreach(other IN LISTS FUSERANK_LAYERS)
      string(LENGTH "${other}" other_len)
      string(LENGTH "${layer}" layer_len)
      if(other_len GREATER layer_len AND h MATCHES "^${other}/")
        set(mine FALSE)
      endif()
    endforeach()
    if(mine)
      list(APPEND own ${h})
    endif()
  endforeach()
  set(${out} ${own} PARENT_SCOPE)
endfunction()

function(fuserank_layer target layer)
  if(NOT layer IN_LIST FUSERANK_LAYERS)
    message(FATAL_ERROR "fuserank_layer(${target} ${layer}): no such layer in scripts/layers.txt")
  endif()
  set(deps ${FUSERANK_LAYER_DEPS_${layer}})
  if("*" IN_LIST deps)
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
    return()
  endif()
  string(REPLACE "/" "_" id "${layer}")
  set(root ${CMAKE_BINARY_DIR}/layers/${id})
  if(NOT EXISTS ${root})
    foreach(visible IN LISTS layer deps)
      if(visible STREQUAL "proto")
        continue()  # generated headers: fuserank_proto's own include directory
      endif()
      _fuserank_layer_headers(${visible} headers)
      foreach(h IN LISTS headers)
        get_filename_component(dir ${root}/${h} DIRECTORY)
        file(MAKE_DIRECTORY ${dir})
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${h} ${root}/${h} SYMBOLIC)
      endforeach()
    endforeach()
    file(MAKE_DIRECTORY ${root})
  endif()
  target_include_directories(${target} PRIVATE ${root})
endfunction()

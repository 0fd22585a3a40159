# What `cmake --install` ships, and nothing else (no tests, examples or benchmarks):
#   <libdir>/libcogwheel_{timer,runtime,io}.a (or .so with BUILD_SHARED_LIBS)
#   <includedir>/cogwheel/...                  every module's include/ tree
#   <libdir>/cmake/cogwheel/                   the find_package(cogwheel) package: targets
#                                              cogwheel::timer, cogwheel::runtime, cogwheel::io
#   <libdir>/pkgconfig/cogwheel.pc             the same libraries for pkg-config (as Meson's)
#   and, when OpenSSL 3 was found: libcogwheel_tls, <includedir>/cogwheel/tls/, the target
#   cogwheel::tls (find_package component tls) and <libdir>/pkgconfig/cogwheel-tls.pc
#   and the Redis client (always built: its RESP parser is its own; linked with cogwheel::tls
#   where that is built, so its targets and cogwheel-redis.pc then require it):
#   <libdir>/libcogwheel_redis.a, <includedir>/cogwheel/redis/...
#   <libdir>/cmake/cogwheel/cogwheelRedisTargets.cmake   cogwheel::redis (COMPONENTS redis)
#   <libdir>/pkgconfig/cogwheel-redis.pc                 the Redis client for pkg-config
# The .pc files are relocatable: their prefix is found from their own place (${pcfiledir}), so
# `cmake --install build --prefix /elsewhere`, or moving the installed tree, keeps them right.
# Included from the root CMakeLists.txt after the modules are defined.
include(CMakePackageConfigHelpers)

set(COGWHEEL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/cogwheel"
    CACHE STRING "Where the find_package(cogwheel) files go, relative to the prefix")

install(TARGETS cogwheel_timer cogwheel_runtime cogwheel_io
  EXPORT cogwheelTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(TARGET cogwheel_tls)
  install(TARGETS cogwheel_tls
    EXPORT cogwheelTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/tls/include/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp")
  set(COGWHEEL_INSTALLED_TLS ON)
else()
  set(COGWHEEL_INSTALLED_TLS OFF)
endif()

foreach(module timer runtime io)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${module}/include/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp")
endforeach()

install(EXPORT cogwheelTargets
  NAMESPACE cogwheel::
  DESTINATION ${COGWHEEL_INSTALL_CMAKEDIR})

if(TARGET cogwheel_redis)
  install(TARGETS cogwheel_redis
    EXPORT cogwheelRedisTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/redis/include/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp")
  install(EXPORT cogwheelRedisTargets
    NAMESPACE cogwheel::
    DESTINATION ${COGWHEEL_INSTALL_CMAKEDIR})
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/cogwheelConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cogwheelConfig.cmake
  INSTALL_DESTINATION ${COGWHEEL_INSTALL_CMAKEDIR})
# 0.x: a minor release may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cogwheelConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cogwheelConfig.cmake
  ${PROJECT_BINARY_DIR}/cogwheelConfigVersion.cmake
  DESTINATION ${COGWHEEL_INSTALL_CMAKEDIR})

# cogwheel.pc, like the one Meson generates: static libraries in link order, liburing as a
# Requires (not .private) so that `pkg-config --libs cogwheel` links without --static. Its
# prefix is the path from <libdir>/pkgconfig back to the install prefix, after ${pcfiledir}
# (an absolute libdir, which cannot move with the prefix, is written as it is).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(COGWHEEL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _cogwheel_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" _cogwheel_up "${_cogwheel_up}")
  set(COGWHEEL_PC_PREFIX "\${pcfiledir}/${_cogwheel_up}")
  unset(_cogwheel_up)
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/cogwheel.pc.in ${PROJECT_BINARY_DIR}/cogwheel.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cogwheel.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET cogwheel_tls)  # relocatable like cogwheel.pc (COGWHEEL_PC_PREFIX above)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/cogwheel-tls.pc.in ${PROJECT_BINARY_DIR}/cogwheel-tls.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cogwheel-tls.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
if(TARGET cogwheel_redis)
  # Built with TLS (cogwheel::tls exists), it needs cogwheel-tls.pc too.
  if(TARGET cogwheel_tls)
    set(COGWHEEL_REDIS_PC_TLS ", cogwheel-tls = ${PROJECT_VERSION}")
  else()
    set(COGWHEEL_REDIS_PC_TLS "")
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/cogwheel-redis.pc.in ${PROJECT_BINARY_DIR}/cogwheel-redis.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cogwheel-redis.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# What `cmake --install` ships, and nothing else (no tests, examples or benchmarks):
#   <libdir>/libcogwheel_{timer,runtime,io}.a (or .so with BUILD_SHARED_LIBS)
#   <includedir>/cogwheel/...                  every module's include/ tree
#   <libdir>/cmake/cogwheel/                   the find_package(cogwheel) package: targets
#                                              cogwheel::timer, cogwheel::runtime, cogwheel::io
#   <libdir>/pkgconfig/cogwheel.pc             the same libraries for pkg-config (as Meson's)
#   and, when OpenSSL 3 was found: libcogwheel_tls, <includedir>/cogwheel/tls/, the target
#   cogwheel::tls (find_package component tls) and <libdir>/pkgconfig/cogwheel-tls.pc
# Included from the root CMakeLists.txt after the three modules are defined.
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
  configure_file(${CMAKE_CURRENT_LIST_DIR}/cogwheel-tls.pc.in ${PROJECT_BINARY_DIR}/cogwheel-tls.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cogwheel-tls.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
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
# Requires (not .private) so that `pkg-config --libs cogwheel` links without --static.
configure_file(${CMAKE_CURRENT_LIST_DIR}/cogwheel.pc.in ${PROJECT_BINARY_DIR}/cogwheel.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cogwheel.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

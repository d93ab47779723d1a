// The one source of paceline_test_pch (tests/CMakeLists.txt): the target
// exists to build the precompiled header every test reuses.

#ifndef PACELINE_TESTS_TESTING_SANITIZERS_H_
#define PACELINE_TESTS_TESTING_SANITIZERS_H_

// Which sanitizer this build carries, for the few tests whose bounds differ
// under one (tools/sanitize.sh: ASan with clang, TSan with GCC). GCC says
// so with __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang with
// __has_feature.

#if defined(__SANITIZE_ADDRESS__)
#define PACELINE_TESTING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PACELINE_TESTING_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define PACELINE_TESTING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PACELINE_TESTING_TSAN 1
#endif
#endif

namespace paceline::testing {

#if defined(PACELINE_TESTING_ASAN)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#if defined(PACELINE_TESTING_TSAN)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_SANITIZERS_H_
